package pack

// ProgressFunc hears the progress of a long stage of pack work: done of
// total objects of the named stage ("compressing objects", "writing
// objects", "receiving objects"). A nil Progress in an options struct
// reports nothing.
type ProgressFunc func(stage string, done, total uint64)
