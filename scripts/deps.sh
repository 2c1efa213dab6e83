#!/usr/bin/env bash
# Installs the Debian packages the interop tests drive (libgit2 via pygit2,
# dulwich, JGit; skopeo and podman, which load the built image),
# redis-server (read API cache tests), the ssh client, chromium (the web
# page's browser tests), git-lfs (the Git LFS tests) and cgit (the
# reference of rgit-bench web), when missing. Tests that need one of
# them skip with a loud message when it cannot be installed.
set -u
need=()
command -v ssh >/dev/null || need+=(openssh-client)
command -v jgit >/dev/null || need+=(jgit-cli)
command -v chromium >/dev/null || need+=(chromium)
command -v git-lfs >/dev/null || need+=(git-lfs)
command -v redis-server >/dev/null || need+=(redis-server)
command -v skopeo >/dev/null || need+=(skopeo)
command -v podman >/dev/null || need+=(podman)
[ -x /usr/lib/cgit/cgit.cgi ] || need+=(cgit)
/usr/bin/python3 -c 'import pygit2' 2>/dev/null || need+=(python3-pygit2)
/usr/bin/python3 -c 'import dulwich' 2>/dev/null || need+=(python3-dulwich)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "WARNING: cannot install ${need[*]} (need root and apt-get); interop tests will skip" >&2
  exit 0
fi
echo "installing ${need[*]}"
apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
  || echo "WARNING: apt-get install ${need[*]} failed; interop tests will skip" >&2
exit 0
