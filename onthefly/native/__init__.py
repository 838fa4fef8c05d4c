"""The native training loop: a minimal Lightning-like driver of OnTheFly's callbacks."""
