/* The classic systolic-ring N-body force computation, for `geofed bench apps`: a program
 * geofed's model knows nothing about. Every rank owns N / ranks bodies; every step a travelling
 * copy of the bodies goes round the ring (MPI_Isend / MPI_Irecv / MPI_Waitall, ranks - 1
 * shifts), each rank adding the forces of the visitors to its own, then the ranks agree on the
 * total kinetic energy (MPI_Allreduce). Usage: nbody_ring N STEPS */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { double x, y, z, m; } Body;

static void accumulate(const Body *mine, const Body *them, int k, double (*f)[3]) {
    for (int i = 0; i < k; i++)
        for (int j = 0; j < k; j++) {
            double dx = them[j].x - mine[i].x, dy = them[j].y - mine[i].y, dz = them[j].z - mine[i].z;
            double r2 = dx * dx + dy * dy + dz * dz + 1e-3, w = them[j].m / (r2 * sqrt(r2));
            f[i][0] += w * dx; f[i][1] += w * dy; f[i][2] += w * dz;
        }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (argc != 3) {
        if (me == 0) fprintf(stderr, "usage: nbody_ring N STEPS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int k = atoi(argv[1]) / ranks, steps = atoi(argv[2]);
    Body *mine = malloc(k * sizeof *mine), *travel = malloc(k * sizeof *travel), *next = malloc(k * sizeof *next);
    double (*f)[3] = malloc(k * sizeof *f), (*vel)[3] = calloc(k, sizeof *vel);
    srand(1 + me);
    for (int i = 0; i < k; i++)
        mine[i] = (Body){rand() / (double)RAND_MAX, rand() / (double)RAND_MAX, rand() / (double)RAND_MAX, 1.0 / k};
    int left = (me + ranks - 1) % ranks, right = (me + 1) % ranks;
    double energy = 0.0;
    for (int s = 0; s < steps; s++) {
        memset(f, 0, k * sizeof *f);
        memcpy(travel, mine, k * sizeof *travel);
        accumulate(mine, travel, k, f);
        for (int shift = 1; shift < ranks; shift++) {
            MPI_Request r[2];
            MPI_Irecv(next, 4 * k, MPI_DOUBLE, left, s, MPI_COMM_WORLD, &r[0]);
            MPI_Isend(travel, 4 * k, MPI_DOUBLE, right, s, MPI_COMM_WORLD, &r[1]);
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
            Body *t = travel; travel = next; next = t;
            accumulate(mine, travel, k, f);
        }
        double local = 0.0;
        for (int i = 0; i < k; i++) {
            for (int d = 0; d < 3; d++) vel[i][d] += 1e-4 * f[i][d];
            mine[i].x += 1e-4 * vel[i][0]; mine[i].y += 1e-4 * vel[i][1]; mine[i].z += 1e-4 * vel[i][2];
            local += 0.5 * mine[i].m * (vel[i][0] * vel[i][0] + vel[i][1] * vel[i][1] + vel[i][2] * vel[i][2]);
        }
        MPI_Allreduce(&local, &energy, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    if (me == 0) printf("nbody_ring %d bodies, %d steps on %d ranks: kinetic energy %.6e\n", k * ranks, steps, ranks, energy);
    free(mine); free(travel); free(next); free(f); free(vel);
    MPI_Finalize();
    return 0;
}
