/*
 * geofed's timed MPI loops, built by setup.sh into a shared library that
 * geofed.bench.kernels loads with ctypes.
 *
 * Why C: the loops must cost what OSU's cost. An mpi4py call adds a few hundred
 * nanoseconds, which is most of a shared-memory latency. Python plans each message
 * size (warm-up, iteration count from the time budget) and does the statistics;
 * these functions only run `n` iterations and record each one's time.
 *
 * Definitions follow the OSU Micro-Benchmarks 7.x:
 *   latency  blocking Send then Recv; the origin times each round trip
 *   bw       `window` Isends (Irecvs at the target), Waitall, then a 1-byte ack
 *   bibw     both ranks post `window` Irecvs and `window` Isends, then Waitall
 *   coll     the operation alone is timed, an untimed Barrier follows
 *
 * Validation (`validate` != 0) fills every message with a pattern that depends on
 * the iteration and the sender and checks every received byte, outside the timed
 * region: before a timed iteration the target tells the origin it is ready (an
 * untimed message), so the check never delays the next measurement.
 */
#include <mpi.h>
#include <stdint.h>
#include <string.h>

enum { TAG_DATA = 1, TAG_ACK = 101, TAG_READY = 102 };
enum { OP_BCAST = 0, OP_GATHER = 1, OP_REDUCE = 2, OP_ALLREDUCE = 3 };

static unsigned char pattern(long iter, int sender, long k)
{
    return (unsigned char)(iter * 131 + sender * 29 + k * 7 + 1);
}

static void fill(char *buf, long size, long iter, int sender)
{
    for (long k = 0; k < size; k++)
        buf[k] = (char)pattern(iter, sender, k);
}

static long count_wrong(const char *buf, long size, long iter, int sender)
{
    long wrong = 0;
    for (long k = 0; k < size; k++)
        wrong += (unsigned char)buf[k] != pattern(iter, sender, k);
    return wrong;
}

/* Ping-pong. role 0 is the origin and times each round trip [s]. The target answers
 * from its own send buffer, as OSU's does: echoing the buffer it had just received
 * into made 128 KiB-4 MiB shared-memory round trips up to twice as slow as OSU's.
 * With validation each side checks what it received, after its part of the round
 * trip and before the next ready message, so outside the timed region. */
int gf_latency(MPI_Fint fcomm, int role, char *sbuf, char *rbuf, long size, long n,
               int validate, long iter0, double *times, long *wrong)
{
    MPI_Comm comm = MPI_Comm_f2c(fcomm);
    int peer = 1 - role;
    for (long i = 0; i < n; i++) {
        long iter = iter0 + i;
        if (validate) {
            fill(sbuf, size, iter, role);
            if (role == 0)
                MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_READY, comm, MPI_STATUS_IGNORE);
            else
                MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_READY, comm);
        }
        if (role == 0) {
            double t0 = MPI_Wtime();
            MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, comm);
            MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
            times[i] = MPI_Wtime() - t0;
        } else {
            MPI_Recv(rbuf, (int)size, MPI_BYTE, peer, TAG_DATA, comm, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_DATA, comm);
        }
        if (validate)
            *wrong += count_wrong(rbuf, size, iter, peer);
    }
    return 0;
}

/* Bandwidth (bidir == 0) and bi-directional bandwidth (bidir != 0). Without
 * validation every message of a window uses the same buffer, as OSU does; with
 * it, message j uses bytes [j*size, (j+1)*size) so each one can be checked. The
 * time of one window is recorded on the origin. */
int gf_bw(MPI_Fint fcomm, int role, char *sbuf, char *rbuf, long size, int window, long n,
          int bidir, int validate, long iter0, double *times, long *wrong)
{
    MPI_Comm comm = MPI_Comm_f2c(fcomm);
    MPI_Request sreq[window], rreq[window];
    int peer = 1 - role;
    long stride = validate ? size : 0;
    int sends = role == 0 || bidir, recvs = role == 1 || bidir;
    for (long i = 0; i < n; i++) {
        long iter = iter0 + i;
        if (validate) {
            if (sends)
                for (int j = 0; j < window; j++)
                    fill(sbuf + j * stride, size, iter * window + j, role);
            if (role == 0)
                MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_READY, comm, MPI_STATUS_IGNORE);
            else
                MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_READY, comm);
        }
        double t0 = MPI_Wtime();
        if (recvs)
            for (int j = 0; j < window; j++)
                MPI_Irecv(rbuf + j * stride, (int)size, MPI_BYTE, peer, TAG_DATA, comm, &rreq[j]);
        if (sends)
            for (int j = 0; j < window; j++)
                MPI_Isend(sbuf + j * stride, (int)size, MPI_BYTE, peer, TAG_DATA, comm, &sreq[j]);
        /* in OSU's order: rank 0 completes its sends first, rank 1 its receives (with both
         * directions busy, the order decides which of them Open MPI's shared memory serves first) */
        if (sends && role == 0)
            MPI_Waitall(window, sreq, MPI_STATUSES_IGNORE);
        if (recvs)
            MPI_Waitall(window, rreq, MPI_STATUSES_IGNORE);
        if (sends && role == 1)
            MPI_Waitall(window, sreq, MPI_STATUSES_IGNORE);
        if (!bidir) {
            if (role == 0)
                MPI_Recv(rbuf, 1, MPI_BYTE, peer, TAG_ACK, comm, MPI_STATUS_IGNORE);
            else
                MPI_Send(sbuf, 1, MPI_BYTE, peer, TAG_ACK, comm);
        }
        if (role == 0)
            times[i] = MPI_Wtime() - t0;
        if (validate && recvs)
            for (int j = 0; j < window; j++)
                *wrong += count_wrong(rbuf + j * stride, size, iter * window + j, peer);
    }
    return 0;
}

/* The value rank r contributes at element k of a reduction in iteration `iter`:
 * small integers, so sums of floats are exact and can be checked. */
static float contribution(long iter, int r, long k)
{
    return (float)((iter + r + k) % 8);
}

/* Collectives on every rank of comm; each rank records its own time per call.
 * For reductions `size` is in bytes of MPI_FLOAT (size / 4 elements), as OSU. */
int gf_coll(MPI_Fint fcomm, int op, char *sbuf, char *rbuf, long size, long n, int rotate_root,
            int validate, long iter0, double *times, long *wrong)
{
    MPI_Comm comm = MPI_Comm_f2c(fcomm);
    int rank, nranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);
    long count = size / (long)sizeof(float);
    float *sf = (float *)sbuf, *rf = (float *)rbuf;
    for (long i = 0; i < n; i++) {
        long iter = iter0 + i;
        int root = rotate_root ? (int)(iter % nranks) : 0;
        if (validate) {
            if (op == OP_BCAST || op == OP_GATHER)
                fill(sbuf, size, iter, rank);
            else
                for (long k = 0; k < count; k++)
                    sf[k] = contribution(iter, rank, k);
            MPI_Barrier(comm);
        }
        double t0 = MPI_Wtime();
        switch (op) {
        case OP_BCAST:
            MPI_Bcast(sbuf, (int)size, MPI_BYTE, root, comm);
            break;
        case OP_GATHER:
            MPI_Gather(sbuf, (int)size, MPI_BYTE, rbuf, (int)size, MPI_BYTE, root, comm);
            break;
        case OP_REDUCE:
            MPI_Reduce(sbuf, rbuf, (int)count, MPI_FLOAT, MPI_SUM, root, comm);
            break;
        case OP_ALLREDUCE:
            MPI_Allreduce(sbuf, rbuf, (int)count, MPI_FLOAT, MPI_SUM, comm);
            break;
        }
        times[i] = MPI_Wtime() - t0;
        MPI_Barrier(comm);
        if (!validate)
            continue;
        if (op == OP_BCAST) {
            *wrong += count_wrong(sbuf, size, iter, root);
        } else if (op == OP_GATHER) {
            if (rank == root)
                for (int r = 0; r < nranks; r++)
                    *wrong += count_wrong(rbuf + (long)r * size, size, iter, r);
        } else if (op == OP_ALLREDUCE || rank == root) {
            for (long k = 0; k < count; k++) {
                float want = 0;
                for (int r = 0; r < nranks; r++)
                    want += contribution(iter, r, k);
                *wrong += rf[k] != want;
            }
        }
    }
    return 0;
}
