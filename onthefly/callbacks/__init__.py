"""Lightning callbacks that act on a run; the native Trainer drives the same objects."""
