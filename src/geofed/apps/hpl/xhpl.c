/* geofed's HPL driver: MPI around HPL 2.0's own benchmark routine.
 *
 * HPL comes from the source of HPCC 1.5.0 (Debian's source package; setup.sh builds
 * its libhpl.a with the venv's mpicc and OpenBLAS). HPCC calls HPL_main from a main
 * that also runs six other benchmarks; this one runs HPL alone. HPL_main reads
 * hpccinf.txt (HPL.dat's format) in the working directory and prints its results
 * where that file says (device 6: stdout). Exit status 1 when a residual check failed.
 */
#include <mpi.h>

#include "hpl.h"
#include "hpl_ptest.h"

int HPL_main(int argc, char **argv, HPL_RuntimeData *rdata, int *failure);

int main(int argc, char **argv) {
    HPL_RuntimeData rdata;
    int failure = 0;
    MPI_Init(&argc, &argv);
    HPL_main(argc, argv, &rdata, &failure);
    MPI_Finalize();
    return failure ? 1 : 0;
}
