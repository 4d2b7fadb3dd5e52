"""The obstacle problem solved by projected Richardson over P2PSAP (seed 003).

problem:  the discrete problem, the relaxation and the sequential projected SOR reference;
peer:     the P2PDC environment (slabs, sync and async schemes, snapshot-residual termination);
dist:     one peer under `geofed run` (MPI only to bootstrap); baseline: projected Jacobi on MPI;
job, cli: `geofed obstacle`; bench, stream: `geofed bench obstacle`; report: its sections.
"""
