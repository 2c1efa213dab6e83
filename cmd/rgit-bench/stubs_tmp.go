package main

import "context"

func runRefdb(ctx context.Context, args []string) error { return nil }
