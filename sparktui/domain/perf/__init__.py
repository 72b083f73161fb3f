"""Performance truth: why a start took as long as it did, and what the disks can give (pure domain code)."""
