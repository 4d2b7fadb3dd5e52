"""The High-Performance Linpack on a federation (seeds 001 and 002): real HPL 2.0 on any placement."""
