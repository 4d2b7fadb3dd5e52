"""MDFS: exhaustive multidimensional feature selection (Piliszek, Mnich, Rudnicki et al.),
with the numbers of the reference library (PyPI `mdfs` 1.5.x) and a native kernel.

core: the analysis (discretization, IG, contrast variables, p-values, relevant set);
data: CSV input and the Madelon-like generator; dist: the MPI job across sites;
cli: `geofed mdfs run|sweep`, `geofed bench mdfs`; report: the report section.
"""
