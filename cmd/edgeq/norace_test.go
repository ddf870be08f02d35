//go:build !race

package main

// raceDetector: the tests run with -race, whose shadow memory adds to what a process resides in.
const raceDetector = false
