"""Layer 1, testing: the tiny local model that plumbing tests and examples train. Imports nothing of the package."""
