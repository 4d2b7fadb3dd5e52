"""Applications that run on a federation (solvers and their environments)."""
