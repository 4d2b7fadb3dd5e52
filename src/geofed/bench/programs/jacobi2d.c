/* A classic 2-D Jacobi heat stencil in the textbook style, for `geofed bench apps`: a program
 * geofed's model knows nothing about. The N x N plate is cut into bands of rows, one per rank;
 * every sweep exchanges the boundary rows with both neighbours (MPI_Sendrecv), and every
 * CHECK sweeps the ranks agree on the largest change (MPI_Allreduce).
 * Usage: jacobi2d N SWEEPS */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK 10

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc != 3) {
        if (me == 0) fprintf(stderr, "usage: jacobi2d N SWEEPS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[1]), sweeps = atoi(argv[2]);
    int rows = n / ranks + (me < n % ranks);
    int up = me > 0 ? me - 1 : MPI_PROC_NULL, down = me < ranks - 1 ? me + 1 : MPI_PROC_NULL;
    /* rows + 2 halo rows; the plate's top edge is held at 1, the rest starts at 0 */
    double *u = calloc((size_t)(rows + 2) * n, sizeof *u), *v = calloc((size_t)(rows + 2) * n, sizeof *v);
    if (me == 0)
        for (int j = 0; j < n; j++) u[j] = v[j] = 1.0;
    double change = 0.0;
    for (int s = 1; s <= sweeps; s++) {
        MPI_Sendrecv(u + n, n, MPI_DOUBLE, up, 0, u + (size_t)(rows + 1) * n, n, MPI_DOUBLE, down, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(u + (size_t)rows * n, n, MPI_DOUBLE, down, 1, u, n, MPI_DOUBLE, up, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        double local = 0.0;
        for (int i = 1; i <= rows; i++)
            for (int j = 1; j < n - 1; j++) {
                double next = 0.25 * (u[(i - 1) * n + j] + u[(i + 1) * n + j] + u[i * n + j - 1] + u[i * n + j + 1]);
                local = fmax(local, fabs(next - u[i * n + j]));
                v[i * n + j] = next;
            }
        double *t = u; u = v; v = t;
        if (me == 0)
            for (int j = 0; j < n; j++) u[j] = 1.0;
        if (s % CHECK == 0)
            MPI_Allreduce(&local, &change, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    if (me == 0) printf("jacobi2d %d x %d, %d sweeps on %d ranks: last change %.3e\n", n, n, sweeps, ranks, change);
    free(u);
    free(v);
    MPI_Finalize();
    return 0;
}
