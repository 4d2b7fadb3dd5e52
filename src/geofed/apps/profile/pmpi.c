/* geofed's MPI profiler: a PMPI interposition library preloaded into an unmodified
 * MPI program (`geofed profile`). Per rank it counts every point-to-point and
 * collective call by pattern (kind, peer or communicator size, bytes) with the time
 * inside the calls, the time between them (compute) and, for non-blocking calls, the
 * time a message had between its post and the wait that completed it (overlap); it
 * keeps the order of the first calls (the iteration pattern is found from it) and
 * writes one text file per rank at MPI_Finalize into $GEOFED_PROFILE_DIR.
 *
 * Nothing is allocated per call: patterns live in a fixed open-addressing table,
 * outstanding requests in another, the call order in a fixed array. */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum kind {
    K_SEND, K_ISEND, K_RECV, K_IRECV, K_SENDRECV, K_WAIT, K_WAITALL, K_WAITANY, K_WAITSOME,
    K_BARRIER, K_BCAST, K_REDUCE, K_ALLREDUCE, K_GATHER, K_SCATTER, K_ALLGATHER, K_ALLTOALL,
    K_REDUCE_SCATTER_BLOCK, K_SCAN, K_COMM_SPLIT, K_COMM_DUP, K_COMM_CREATE, K_CART_CREATE, K_IBARRIER,
    K_IBCAST, K_IREDUCE, K_IALLREDUCE, K_IGATHER, K_ISCATTER, K_IALLGATHER, K_IALLTOALL, NKINDS
};
static const char *KIND_NAMES[NKINDS] = {
    "send", "isend", "recv", "irecv", "sendrecv", "wait", "waitall", "waitany", "waitsome",
    "barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall",
    "reduce_scatter_block", "scan", "comm_split", "comm_dup", "comm_create", "cart_create", "ibarrier",
    "ibcast", "ireduce", "iallreduce", "igather", "iscatter", "iallgather", "ialltoall"};

#define PATTERNS 4096     /* distinct (kind, peer, source, bytes, size) a rank may use */
#define ORDER 65536       /* calls whose order is kept: enough to see an iteration repeat */
#define REQUESTS 4096     /* outstanding non-blocking requests tracked for overlap */
#define COMMS 32          /* communicators whose ranks are translated to MPI_COMM_WORLD's */
#define WAIT_BATCH 256    /* requests of one Waitall whose overlap is measured */

struct pattern {
    int used, kind, peer, source, size;
    long long bytes, count;
    double inside_s, inside_sq, inside_min, inside_max, gap_s, overlap_s;
    long long overlapped;
    double poll_s, poll_sq;  /* a polled wait's intervals between its polls: sum, sum of squares */
    double gap_cpu_s;        /* the process's CPU time in the gaps: their compute without the waits for a core */
    long long slept, sleeps; /* polled waits that slept between polls; their intervals longer than a poll's turn */
    double spin_s, sleep_s;  /* those waits' polling before their first sleep; their sleeps' intervals */
};

static struct pattern patterns[PATTERNS];
static long long patterns_full;   /* calls that found no free pattern */
static uint16_t order[ORDER];
static long long calls;
static struct { MPI_Request req; int pattern; double posted; } requests[REQUESTS];
static struct { MPI_Comm comm; int size; int *world; } comms[COMMS];
static int world_rank = -1, world_size;
static double t_init, t_last_end, cpu_last_end;
static int active;                /* between MPI_Init and MPI_Finalize */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The CPU time of the thread calling MPI: a gap's compute as the rehearsal replays it. Its
 * wall time holds the waits for a core too (three ranks on two cores), which a replay on
 * another placement, with another contention, should not copy but undergo. The process's
 * CPU time would count its other threads (a Python rank's: 0.03-0.04 s in the gaps of the
 * bench's programs, 0.1 s in MDFS's tail), which do not hold its calls back. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Reading the CPU clock is a system call (0.8 us on the testbed host, a VM, against 44 ns
 * for the wall clock), so it is read only after a stretch longer than SHORT_S since the
 * last reading: a shorter one is taken as all CPU (a process is seldom descheduled for
 * less than a time slice). A program of fine-grained calls pays no more than before. */
#define SHORT_S 50e-6

/* The CPU time at wall time t, the last reading being cpu_from at t_from. */
static double cpu_since(double t_from, double cpu_from, double t) {
    return t - t_from <= SHORT_S ? cpu_from + (t - t_from) : cpu_now();
}

/* The wall time a call begins at, its CPU time kept beside it for the gap before it. */
static double entered_cpu;

static double enter(void) {
    double t = now();
    entered_cpu = cpu_since(t_last_end, cpu_last_end, t);
    return t;
}

static long long type_bytes(MPI_Count count, MPI_Datatype type) {
    int size = 0;
    if (type != MPI_DATATYPE_NULL)
        PMPI_Type_size(type, &size);
    return (long long)count * size;
}

static int comm_size(MPI_Comm comm) {
    int n = 0;
    PMPI_Comm_size(comm, &n);
    return n;
}

/* The MPI_COMM_WORLD rank of `peer` in `comm` (-1: MPI_PROC_NULL, -2: any source).
 * Translations are made once per communicator and kept. */
static int world_of(MPI_Comm comm, int peer) {
    if (peer == MPI_PROC_NULL) return -1;
    if (peer == MPI_ANY_SOURCE) return -2;
    if (comm == MPI_COMM_WORLD) return peer;
    int free_slot = -1;
    for (int i = 0; i < COMMS; i++) {
        if (comms[i].world && comms[i].comm == comm)
            return peer < comms[i].size ? comms[i].world[peer] : -3;
        if (!comms[i].world && free_slot < 0) free_slot = i;
    }
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (free_slot < 0 || inter) return -3;  /* not translated: named as an unknown peer */
    int n = comm_size(comm);
    int *local = malloc(sizeof(int) * n), *world = malloc(sizeof(int) * n);
    MPI_Group g, wg;
    PMPI_Comm_group(comm, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    for (int i = 0; i < n; i++) local[i] = i;
    PMPI_Group_translate_ranks(g, n, local, wg, world);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    free(local);
    comms[free_slot].comm = comm;
    comms[free_slot].size = n;
    comms[free_slot].world = world;
    return peer < n ? world[peer] : -3;
}

static void forget_comm(MPI_Comm comm) {
    for (int i = 0; i < COMMS; i++)
        if (comms[i].world && comms[i].comm == comm) {
            free(comms[i].world);
            comms[i].world = NULL;
        }
}

static int pattern_of(int kind, int peer, int source, long long bytes, int size) {
    uint64_t h = (uint64_t)kind * 0x9E3779B97F4A7C15ull ^ (uint64_t)(peer + 7) * 0xC2B2AE3D27D4EB4Full
               ^ (uint64_t)(source + 11) * 0x165667B19E3779F9ull ^ (uint64_t)bytes * 0x27D4EB2F165667C5ull
               ^ (uint64_t)size * 0xFF51AFD7ED558CCDull;
    for (int probe = 0; probe < PATTERNS; probe++) {
        int i = (int)((h + probe) % PATTERNS);
        struct pattern *p = &patterns[i];
        if (!p->used) {
            p->used = 1;
            p->kind = kind, p->peer = peer, p->source = source, p->bytes = bytes, p->size = size;
            p->inside_min = 1e300;
            return i;
        }
        if (p->kind == kind && p->peer == peer && p->source == source && p->bytes == bytes && p->size == size)
            return i;
    }
    return -1;
}

/* A program that polls waits as a blocking call would: MPI_Test or MPI_Testall until its
 * requests are done (as the Gray-Scott simulation does, to sleep while it waits), or
 * MPI_Iprobe until a message is there and then MPI_Recv (as HPL's panel broadcasts do).
 * The polls that find nothing, and what runs between them when it is short (a sleep, the
 * loop itself), are one wait from the first poll: the test that completes is counted as
 * a wait (waitall) over that time, the receive after a probe as starting at its first
 * poll. A longer stretch between two polls is compute: the wait starts again at the next
 * poll; another call ends it. The intervals between the polls of a wait are summed with
 * their squares: a message that comes while the program waits this way is seen at the
 * next poll, on average sum(x^2) / (2 sum(x)) after it arrived (the interval it lands in
 * is a long one more often), which a wait across a link shows and one inside a site,
 * whose messages mostly come before the first sleep, does not. */
#define POLL_GAP_S 1e-3
/* Between two polls of a loop that spins, the loop's own turn (a Test from Python: a few us);
 * a longer interval slept (or waited for a core). How a wait polls, its spin then its
 * sleeps, is what a rehearsal repeats: across a link a program that sleeps between polls
 * runs slower than one that spins (the Gray-Scott simulation across ma-hd: +58 % against +8 %). */
#define POLL_SLEEP_S 20e-6
static double poll_start = -1, poll_last = -1, poll_prev, streak_s, streak_sq, poll_start_cpu;
static double streak_spin_s, streak_sleep_s;
static long long streak_sleeps;

static double polled(double t0, double t1) {
    if (poll_start < 0 || t0 - poll_last > POLL_GAP_S) {
        poll_start = t0;
        poll_start_cpu = cpu_since(t_last_end, cpu_last_end, t0);
        streak_s = streak_sq = streak_spin_s = streak_sleep_s = 0;
        streak_sleeps = 0;
    } else {
        double x = t0 - poll_prev;
        streak_s += x;
        streak_sq += x * x;
        if (x > POLL_SLEEP_S) {
            streak_sleeps++;
            streak_sleep_s += x;
        } else if (!streak_sleeps) {
            streak_spin_s += x;
        }
    }
    poll_prev = t0;
    poll_last = t1;
    return poll_start;
}

/* When a receive that begins at t0 began waiting: at the polls just before it, if any. */
static double waited_since(double t0) {
    return poll_start >= 0 && t0 - poll_last <= POLL_GAP_S ? poll_start : t0;
}

/* A matched receive's probe (below): when it began, in wall and CPU time. */
static double probe_start = -1, probe_began = -1, probe_began_cpu;

/* The CPU time at wall time t0, the beginning of a call or of the polls or probe before it. */
static double cpu_at(double t0) {
    if (t0 == poll_start) return poll_start_cpu;
    if (t0 == probe_began) return probe_began_cpu;
    return entered_cpu;
}

/* Count one call that ran from t0 to t1; its pattern's index, or -1. */
static int record(int kind, int peer, int source, long long bytes, int size, double t0, double t1) {
    if (!active) return -1;
    int i = pattern_of(kind, peer, source, bytes, size);
    if (i < 0) {
        patterns_full++;
        return -1;
    }
    struct pattern *p = &patterns[i];
    double inside = t1 - t0;
    p->count++;
    p->inside_s += inside;
    p->inside_sq += inside * inside;
    if (inside < p->inside_min) p->inside_min = inside;
    if (inside > p->inside_max) p->inside_max = inside;
    p->gap_s += t0 - t_last_end;
    double cpu0 = cpu_at(t0);
    p->gap_cpu_s += cpu0 - cpu_last_end;
    t_last_end = t1;
    cpu_last_end = cpu_since(t0, cpu0, t1);
    if (poll_start >= 0 && t0 == poll_start) {  /* the call is the wait its polls made */
        p->poll_s += streak_s;
        p->poll_sq += streak_sq;
        if (streak_sleeps) {
            p->slept++;
            p->spin_s += streak_spin_s;
            p->sleeps += streak_sleeps;
            p->sleep_s += streak_sleep_s;
        }
    }
    poll_start = -1;  /* a poll after another call starts a wait of its own */
    if (calls < ORDER) order[calls] = (uint16_t)i;
    calls++;
    return i;
}

static void posted(MPI_Request req, int pattern, double t) {
    if (pattern < 0 || req == MPI_REQUEST_NULL) return;
    unsigned h = (unsigned)((uintptr_t)req * 2654435761u);
    for (int probe = 0; probe < REQUESTS; probe++) {
        int i = (h + probe) % REQUESTS;
        if (requests[i].req == MPI_REQUEST_NULL || requests[i].req == 0) {
            requests[i].req = req, requests[i].pattern = pattern, requests[i].posted = t;
            return;
        }
    }
}

/* A request completed by a wait that began at `wait_start`: its message had the time
 * since its post to progress (overlap). */
static void completed(MPI_Request req, double wait_start) {
    if (req == MPI_REQUEST_NULL) return;
    unsigned h = (unsigned)((uintptr_t)req * 2654435761u);
    for (int probe = 0; probe < REQUESTS; probe++) {
        int i = (h + probe) % REQUESTS;
        if (requests[i].req == 0) return;
        if (requests[i].req == req && requests[i].pattern >= 0) {
            struct pattern *p = &patterns[requests[i].pattern];
            p->overlap_s += wait_start - requests[i].posted;
            p->overlapped++;
            requests[i].pattern = -1;  /* a tombstone keeps the probe chain */
            requests[i].req = MPI_REQUEST_NULL;
            return;
        }
    }
}

static void start(void) {
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    memset(requests, 0, sizeof requests);
    t_init = t_last_end = now();
    cpu_last_end = cpu_now();
    active = 1;
}

int MPI_Init(int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    start();
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    start();
    return rc;
}

static void write_profile(double t_end, double cpu_end) {
    const char *dir = getenv("GEOFED_PROFILE_DIR");
    if (!dir || !*dir) return;
    char path[4096], host[256] = "";
    snprintf(path, sizeof path, "%s/rank-%d.txt", dir, world_rank);
    gethostname(host, sizeof host - 1);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "geofed profile: cannot write %s\n", path);
        return;
    }
    fprintf(f, "geofed-profile 1\nrank %d\nranks %d\nhost %s\ntotal_s %.9f\ntail_s %.9f\ntail_cpu_s %.9f\n"
               "calls %lld\npatterns_full %lld\n", world_rank, world_size, host, t_end - t_init,
            t_end - t_last_end, cpu_end - cpu_last_end, calls, patterns_full);
    for (int i = 0; i < PATTERNS; i++) {
        struct pattern *p = &patterns[i];
        if (!p->used || !p->count) continue;
        fprintf(f, "pattern %d %s %d %d %lld %d %lld %.9g %.9g %.9g %.9g %.9g %.9g %lld %.9g %.9g %.9g %lld %.9g "
                   "%lld %.9g\n", i, KIND_NAMES[p->kind], p->peer, p->source, p->bytes, p->size, p->count,
                p->inside_s, p->inside_sq, p->inside_min, p->inside_max, p->gap_s, p->overlap_s, p->overlapped,
                p->poll_s, p->poll_sq, p->gap_cpu_s, p->slept, p->spin_s, p->sleeps, p->sleep_s);
    }
    long long kept = calls < ORDER ? calls : ORDER;
    fprintf(f, "order");
    for (long long i = 0; i < kept; i++) fprintf(f, " %u", order[i]);
    fprintf(f, "\n");
    fclose(f);
}

int MPI_Finalize(void) {
    if (active) {
        active = 0;
        double cpu_end = cpu_now();
        write_profile(now(), cpu_end);
    }
    return PMPI_Finalize();
}

int MPI_Comm_free(MPI_Comm *comm) {
    forget_comm(*comm);
    return PMPI_Comm_free(comm);
}

/* ------------------------------------------------------------ point to point */
/* Each call twice: with an int count, and MPI-4's large-count `_c` form (MPI_Count),
 * which mpi4py calls where the library has it. */

#define SEND(SUF, COUNT)                                                                                \
int MPI_Send##SUF(const void *buf, COUNT count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {  \
    double t0 = enter();                                                                                \
    int rc = PMPI_Send##SUF(buf, count, type, dest, tag, comm);                                         \
    record(K_SEND, world_of(comm, dest), -1, type_bytes(count, type), 0, t0, now());                    \
    return rc;                                                                                          \
}

#define RECV(SUF, COUNT)                                                                                \
int MPI_Recv##SUF(void *buf, COUNT count, MPI_Datatype type, int source, int tag, MPI_Comm comm,       \
                  MPI_Status *status) {                                                                 \
    MPI_Status own;                                                                                     \
    if (status == MPI_STATUS_IGNORE) status = &own;                                                     \
    double t0 = enter();                                                                                \
    int rc = PMPI_Recv##SUF(buf, count, type, source, tag, comm, status);                               \
    double t1 = now();                                                                                  \
    int got = MPI_UNDEFINED;                                                                            \
    PMPI_Get_count(status, MPI_BYTE, &got);                                                             \
    int from = source == MPI_ANY_SOURCE ? status->MPI_SOURCE : source;                                  \
    record(K_RECV, world_of(comm, from), -1, got == MPI_UNDEFINED ? type_bytes(count, type) : got, 0,   \
           waited_since(t0), t1);                                                                       \
    return rc;                                                                                          \
}

/* Isend and Irecv: the request is kept to measure its overlap at the wait that completes it. */
#define NONBLOCKING(CALL, KIND, BUF, SUF, COUNT)                                                        \
int MPI_##CALL##SUF(BUF buf, COUNT count, MPI_Datatype type, int peer, int tag, MPI_Comm comm,          \
                    MPI_Request *req) {                                                                 \
    double t0 = enter();                                                                                \
    int rc = PMPI_##CALL##SUF(buf, count, type, peer, tag, comm, req);                                  \
    double t1 = now();                                                                                  \
    posted(*req, record(KIND, world_of(comm, peer), -1, type_bytes(count, type), 0, t0, t1), t1);      \
    return rc;                                                                                          \
}

#define SENDRECV(SUF, COUNT)                                                                            \
int MPI_Sendrecv##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, int dest,           \
                      int sendtag, void *recvbuf, COUNT recvcount, MPI_Datatype recvtype, int source,   \
                      int recvtag, MPI_Comm comm, MPI_Status *status) {                                 \
    double t0 = enter();                                                                                \
    int rc = PMPI_Sendrecv##SUF(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,        \
                                recvtype, source, recvtag, comm, status);                               \
    record(K_SENDRECV, world_of(comm, dest), world_of(comm, source), type_bytes(sendcount, sendtype),   \
           0, t0, now());                                                                               \
    return rc;                                                                                          \
}

/* A matched receive (mpi4py's pickled recv: MPI_Mprobe, then MPI_Mrecv) is one recv,
 * timed from the probe: the probe is where it waits. */
static MPI_Comm probe_comm = MPI_COMM_NULL;

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status) {
    probe_start = probe_began = enter();
    probe_began_cpu = entered_cpu;
    probe_comm = comm;
    return PMPI_Mprobe(source, tag, comm, message, status);
}

#define MRECV(SUF, COUNT)                                                                               \
int MPI_Mrecv##SUF(void *buf, COUNT count, MPI_Datatype type, MPI_Message *message, MPI_Status *status) { \
    MPI_Status own;                                                                                     \
    if (status == MPI_STATUS_IGNORE) status = &own;                                                     \
    double t0 = probe_start >= 0 ? probe_start : waited_since(enter());                                 \
    probe_start = -1;                                                                                   \
    int rc = PMPI_Mrecv##SUF(buf, count, type, message, status);                                        \
    double t1 = now();                                                                                  \
    int got = MPI_UNDEFINED;                                                                            \
    PMPI_Get_count(status, MPI_BYTE, &got);                                                             \
    int from = probe_comm == MPI_COMM_NULL ? status->MPI_SOURCE : world_of(probe_comm, status->MPI_SOURCE);  \
    record(K_RECV, from, -1, got == MPI_UNDEFINED ? type_bytes(count, type) : got, 0, t0, t1);         \
    return rc;                                                                                          \
}

SEND(, int)
RECV(, int)
NONBLOCKING(Isend, K_ISEND, const void *, , int)
NONBLOCKING(Irecv, K_IRECV, void *, , int)
SENDRECV(, int)
MRECV(, int)
/* An MPI-3 library (Open MPI 4.1) has no `_c` calls, and mpi4py then makes none. */
#if MPI_VERSION >= 4
SEND(_c, MPI_Count)
RECV(_c, MPI_Count)
NONBLOCKING(Isend, K_ISEND, const void *, _c, MPI_Count)
NONBLOCKING(Irecv, K_IRECV, void *, _c, MPI_Count)
SENDRECV(_c, MPI_Count)
MRECV(_c, MPI_Count)
#endif

/* ------------------------------------------------------------ waits */

/* The first WAIT_BATCH requests of a call, kept to match them to their posts once it returns. */
static int keep(MPI_Request kept[], const MPI_Request reqs[], int count) {
    int n = count < WAIT_BATCH ? count : WAIT_BATCH;
    memcpy(kept, reqs, sizeof(MPI_Request) * (n > 0 ? n : 0));
    return n;
}

int MPI_Wait(MPI_Request *req, MPI_Status *status) {
    MPI_Request r = *req;
    double t0 = enter();
    int rc = PMPI_Wait(req, status);
    double t1 = now();
    completed(r, t0);
    record(K_WAIT, -1, -1, 0, 1, t0, t1);
    return rc;
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status statuses[]) {
    MPI_Request kept[WAIT_BATCH];
    int n = keep(kept, reqs, count);
    double t0 = enter();
    int rc = PMPI_Waitall(count, reqs, statuses);
    double t1 = now();
    for (int i = 0; i < n; i++) completed(kept[i], t0);
    record(K_WAITALL, -1, -1, 0, count, t0, t1);
    return rc;
}

int MPI_Waitany(int count, MPI_Request reqs[], int *index, MPI_Status *status) {
    MPI_Request kept[WAIT_BATCH];
    int n = keep(kept, reqs, count);
    double t0 = enter();
    int rc = PMPI_Waitany(count, reqs, index, status);
    double t1 = now();
    if (*index != MPI_UNDEFINED && *index < n) completed(kept[*index], t0);
    record(K_WAITANY, -1, -1, 0, count, t0, t1);
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[]) {
    MPI_Request kept[WAIT_BATCH];
    int n = keep(kept, reqs, incount);
    double t0 = enter();
    int rc = PMPI_Waitsome(incount, reqs, outcount, indices, statuses);
    double t1 = now();
    for (int i = 0; *outcount != MPI_UNDEFINED && i < *outcount; i++)
        if (indices[i] < n) completed(kept[indices[i]], t0);
    record(K_WAITSOME, -1, -1, 0, incount, t0, t1);
    return rc;
}

/* ------------------------------------------------------------ tests and probes */

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
    double t0 = now();
    int rc = PMPI_Iprobe(source, tag, comm, flag, status);
    if (active) polled(t0, now());
    return rc;
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status) {
    double t0 = now();
    int rc = PMPI_Improbe(source, tag, comm, flag, message, status);
    if (active) polled(t0, now());
    probe_comm = comm;
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status) {
    MPI_Request r = *req;
    double t0 = now();
    int rc = PMPI_Test(req, flag, status);
    double t1 = now();
    if (!active || r == MPI_REQUEST_NULL) return rc;
    double start = polled(t0, t1);
    if (*flag) {
        completed(r, start);
        record(K_WAIT, -1, -1, 0, 1, start, t1);
    }
    return rc;
}

int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[]) {
    MPI_Request kept[WAIT_BATCH];
    int n = keep(kept, reqs, count);
    double t0 = now();
    int rc = PMPI_Testall(count, reqs, flag, statuses);
    double t1 = now();
    if (!active) return rc;
    double start = polled(t0, t1);
    if (*flag) {
        for (int i = 0; i < n; i++) completed(kept[i], start);
        record(K_WAITALL, -1, -1, 0, count, start, t1);
    }
    return rc;
}

/* ------------------------------------------------------------ collectives */
/* bytes: the vector of a reduction or broadcast, one rank's block of a gather,
 * scatter or all-to-all (the mean block for their v forms, counted as the same kind);
 * `peer` is the root where there is one. */

#define COLLECTIVE(kind, bytes, root, call)                                   \
    double t0 = enter();                                                      \
    int rc = call;                                                            \
    record(kind, root, -1, bytes, comm_size(comm), t0, now());                \
    return rc;

int MPI_Barrier(MPI_Comm comm) {
    COLLECTIVE(K_BARRIER, 0, -1, PMPI_Barrier(comm))
}

/* Non-blocking collectives: recorded as their own kinds, bytes as their blocking forms',
 * with the request kept for the wait that completes them (a barrier waited for by polling
 * asleep, geofed's quiet barrier, so that a rank done early leaves its core to the ranks
 * still computing: without it, its wait would complete nothing). */
#define ICOLLECTIVE(kind, bytes, root, call)                                       \
    double t0 = enter();                                                           \
    int rc = call;                                                                 \
    double t1 = now();                                                             \
    posted(*req, record(kind, root, -1, bytes, comm_size(comm), t0, t1), t1);     \
    return rc;

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req) {
    ICOLLECTIVE(K_IBARRIER, 0, -1, PMPI_Ibarrier(comm, req))
}

#define COLLECTIVES(SUF, COUNT)                                                                          \
int MPI_Bcast##SUF(void *buf, COUNT count, MPI_Datatype type, int root, MPI_Comm comm) {                 \
    COLLECTIVE(K_BCAST, type_bytes(count, type), world_of(comm, root),                                   \
               PMPI_Bcast##SUF(buf, count, type, root, comm))                                            \
}                                                                                                        \
int MPI_Reduce##SUF(const void *sendbuf, void *recvbuf, COUNT count, MPI_Datatype type, MPI_Op op,       \
                    int root, MPI_Comm comm) {                                                           \
    COLLECTIVE(K_REDUCE, type_bytes(count, type), world_of(comm, root),                                  \
               PMPI_Reduce##SUF(sendbuf, recvbuf, count, type, op, root, comm))                          \
}                                                                                                        \
int MPI_Allreduce##SUF(const void *sendbuf, void *recvbuf, COUNT count, MPI_Datatype type, MPI_Op op,    \
                       MPI_Comm comm) {                                                                  \
    COLLECTIVE(K_ALLREDUCE, type_bytes(count, type), -1,                                                 \
               PMPI_Allreduce##SUF(sendbuf, recvbuf, count, type, op, comm))                             \
}                                                                                                        \
int MPI_Scan##SUF(const void *sendbuf, void *recvbuf, COUNT count, MPI_Datatype type, MPI_Op op,         \
                  MPI_Comm comm) {                                                                       \
    COLLECTIVE(K_SCAN, type_bytes(count, type), -1, PMPI_Scan##SUF(sendbuf, recvbuf, count, type, op, comm)) \
}                                                                                                        \
int MPI_Gather##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf,          \
                    COUNT recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {                   \
    COLLECTIVE(K_GATHER, sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype)                       \
                                                 : type_bytes(sendcount, sendtype), world_of(comm, root),    \
               PMPI_Gather##SUF(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)) \
}                                                                                                        \
int MPI_Scatter##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf,         \
                     COUNT recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {                  \
    COLLECTIVE(K_SCATTER, type_bytes(recvcount, recvtype), world_of(comm, root),                         \
               PMPI_Scatter##SUF(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm)) \
}                                                                                                        \
int MPI_Allgather##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf,       \
                       COUNT recvcount, MPI_Datatype recvtype, MPI_Comm comm) {                          \
    COLLECTIVE(K_ALLGATHER, type_bytes(recvcount, recvtype), -1,                                         \
               PMPI_Allgather##SUF(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm))    \
}                                                                                                        \
int MPI_Alltoall##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf,        \
                      COUNT recvcount, MPI_Datatype recvtype, MPI_Comm comm) {                           \
    COLLECTIVE(K_ALLTOALL, type_bytes(recvcount, recvtype), -1,                                          \
               PMPI_Alltoall##SUF(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm))     \
}                                                                                                        \
int MPI_Reduce_scatter_block##SUF(const void *sendbuf, void *recvbuf, COUNT recvcount, MPI_Datatype type, \
                                  MPI_Op op, MPI_Comm comm) {                                            \
    COLLECTIVE(K_REDUCE_SCATTER_BLOCK, type_bytes(recvcount, type), -1,                                  \
               PMPI_Reduce_scatter_block##SUF(sendbuf, recvbuf, recvcount, type, op, comm))              \
}

COLLECTIVES(, int)
#if MPI_VERSION >= 4
COLLECTIVES(_c, MPI_Count)
#endif

/* Communicator creation is a collective over the parent communicator (MPICH: an allgather
 * of the colours and keys for a split, allreduces agreeing on a context id): across the
 * link it costs round trips (HPL's grid: three splits, 18 ms each on icm-task, 0.2-0.5 ms
 * at one site), which a profile that left it out counted as compute. */
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
    COLLECTIVE(K_COMM_SPLIT, 0, -1, PMPI_Comm_split(comm, color, key, newcomm))
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm) {
    COLLECTIVE(K_COMM_DUP, 0, -1, PMPI_Comm_dup(comm, newcomm))
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm) {
    COLLECTIVE(K_COMM_CREATE, 0, -1, PMPI_Comm_create(comm, group, newcomm))
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm *newcomm) {
    COLLECTIVE(K_CART_CREATE, 0, -1, PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm))
}

/* The mean of a v collective's `counts` of `type`, per rank of `comm`. */
#define MEAN_BYTES(counts, type, comm)                                                                   \
    ({ int n_ = comm_size(comm); long long sum_ = 0;                                                     \
       for (int i_ = 0; i_ < n_; i_++) sum_ += (long long)(counts)[i_];                                  \
       n_ ? type_bytes(sum_ / n_, type) : 0; })

#define VCOLLECTIVES(SUF, COUNT, DISPL)                                                                  \
int MPI_Allgatherv##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf,      \
                        const COUNT recvcounts[], const DISPL displs[], MPI_Datatype recvtype,           \
                        MPI_Comm comm) {                                                                 \
    COLLECTIVE(K_ALLGATHER, MEAN_BYTES(recvcounts, recvtype, comm), -1,                                  \
               PMPI_Allgatherv##SUF(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, \
                                    comm))                                                               \
}                                                                                                        \
int MPI_Alltoallv##SUF(const void *sendbuf, const COUNT sendcounts[], const DISPL sdispls[],             \
                       MPI_Datatype sendtype, void *recvbuf, const COUNT recvcounts[],                   \
                       const DISPL rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {                    \
    COLLECTIVE(K_ALLTOALL, MEAN_BYTES(recvcounts, recvtype, comm), -1,                                   \
               PMPI_Alltoallv##SUF(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, \
                                   recvtype, comm))                                                      \
}                                                                                                        \
int MPI_Gatherv##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf,         \
                     const COUNT recvcounts[], const DISPL displs[], MPI_Datatype recvtype, int root,    \
                     MPI_Comm comm) {                                                                    \
    COLLECTIVE(K_GATHER, sendbuf == MPI_IN_PLACE ? MEAN_BYTES(recvcounts, recvtype, comm)                \
                                                 : type_bytes(sendcount, sendtype), world_of(comm, root),\
               PMPI_Gatherv##SUF(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,    \
                                 root, comm))                                                            \
}                                                                                                        \
int MPI_Scatterv##SUF(const void *sendbuf, const COUNT sendcounts[], const DISPL displs[],               \
                      MPI_Datatype sendtype, void *recvbuf, COUNT recvcount, MPI_Datatype recvtype,      \
                      int root, MPI_Comm comm) {                                                         \
    COLLECTIVE(K_SCATTER, recvbuf == MPI_IN_PLACE ? MEAN_BYTES(sendcounts, sendtype, comm)               \
                                                  : type_bytes(recvcount, recvtype), world_of(comm, root), \
               PMPI_Scatterv##SUF(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,   \
                                  root, comm))                                                           \
}

VCOLLECTIVES(, int, int)
#if MPI_VERSION >= 4
VCOLLECTIVES(_c, MPI_Count, MPI_Aint)
#endif

#define ICOLLECTIVES(SUF, COUNT, DISPL)                                                                  \
int MPI_Ibcast##SUF(void *buf, COUNT count, MPI_Datatype type, int root, MPI_Comm comm,                  \
                    MPI_Request *req) {                                                                  \
    ICOLLECTIVE(K_IBCAST, type_bytes(count, type), world_of(comm, root),                                 \
                PMPI_Ibcast##SUF(buf, count, type, root, comm, req))                                     \
}                                                                                                        \
int MPI_Ireduce##SUF(const void *sendbuf, void *recvbuf, COUNT count, MPI_Datatype type, MPI_Op op,      \
                     int root, MPI_Comm comm, MPI_Request *req) {                                        \
    ICOLLECTIVE(K_IREDUCE, type_bytes(count, type), world_of(comm, root),                                \
                PMPI_Ireduce##SUF(sendbuf, recvbuf, count, type, op, root, comm, req))                   \
}                                                                                                        \
int MPI_Iallreduce##SUF(const void *sendbuf, void *recvbuf, COUNT count, MPI_Datatype type, MPI_Op op,   \
                        MPI_Comm comm, MPI_Request *req) {                                               \
    ICOLLECTIVE(K_IALLREDUCE, type_bytes(count, type), -1,                                               \
                PMPI_Iallreduce##SUF(sendbuf, recvbuf, count, type, op, comm, req))                      \
}                                                                                                        \
int MPI_Igather##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf,         \
                     COUNT recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *req) { \
    ICOLLECTIVE(K_IGATHER, sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype)                     \
                                                   : type_bytes(sendcount, sendtype), world_of(comm, root), \
                PMPI_Igather##SUF(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, \
                                  req))                                                                  \
}                                                                                                        \
int MPI_Iscatter##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf,        \
                      COUNT recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *req) { \
    ICOLLECTIVE(K_ISCATTER, type_bytes(recvcount, recvtype), world_of(comm, root),                       \
                PMPI_Iscatter##SUF(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,     \
                                   comm, req))                                                           \
}                                                                                                        \
int MPI_Iallgather##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf,      \
                        COUNT recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *req) {       \
    ICOLLECTIVE(K_IALLGATHER, type_bytes(recvcount, recvtype), -1,                                       \
                PMPI_Iallgather##SUF(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,   \
                                     req))                                                               \
}                                                                                                        \
int MPI_Ialltoall##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf,       \
                       COUNT recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *req) {        \
    ICOLLECTIVE(K_IALLTOALL, type_bytes(recvcount, recvtype), -1,                                        \
                PMPI_Ialltoall##SUF(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,    \
                                    req))                                                                \
}                                                                                                        \
int MPI_Iallgatherv##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf,     \
                         const COUNT recvcounts[], const DISPL displs[], MPI_Datatype recvtype,          \
                         MPI_Comm comm, MPI_Request *req) {                                              \
    ICOLLECTIVE(K_IALLGATHER, MEAN_BYTES(recvcounts, recvtype, comm), -1,                                \
                PMPI_Iallgatherv##SUF(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,         \
                                      recvtype, comm, req))                                              \
}                                                                                                        \
int MPI_Ialltoallv##SUF(const void *sendbuf, const COUNT sendcounts[], const DISPL sdispls[],            \
                        MPI_Datatype sendtype, void *recvbuf, const COUNT recvcounts[],                  \
                        const DISPL rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *req) { \
    ICOLLECTIVE(K_IALLTOALL, MEAN_BYTES(recvcounts, recvtype, comm), -1,                                 \
                PMPI_Ialltoallv##SUF(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,        \
                                     rdispls, recvtype, comm, req))                                      \
}                                                                                                        \
int MPI_Igatherv##SUF(const void *sendbuf, COUNT sendcount, MPI_Datatype sendtype, void *recvbuf,        \
                      const COUNT recvcounts[], const DISPL displs[], MPI_Datatype recvtype, int root,   \
                      MPI_Comm comm, MPI_Request *req) {                                                 \
    ICOLLECTIVE(K_IGATHER, sendbuf == MPI_IN_PLACE ? MEAN_BYTES(recvcounts, recvtype, comm)              \
                                                   : type_bytes(sendcount, sendtype), world_of(comm, root), \
                PMPI_Igatherv##SUF(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,  \
                                   root, comm, req))                                                     \
}                                                                                                        \
int MPI_Iscatterv##SUF(const void *sendbuf, const COUNT sendcounts[], const DISPL displs[],              \
                       MPI_Datatype sendtype, void *recvbuf, COUNT recvcount, MPI_Datatype recvtype,     \
                       int root, MPI_Comm comm, MPI_Request *req) {                                      \
    ICOLLECTIVE(K_ISCATTER, recvbuf == MPI_IN_PLACE ? MEAN_BYTES(sendcounts, sendtype, comm)             \
                                                    : type_bytes(recvcount, recvtype), world_of(comm, root), \
                PMPI_Iscatterv##SUF(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, \
                                    root, comm, req))                                                    \
}

ICOLLECTIVES(, int, int)
#if MPI_VERSION >= 4
ICOLLECTIVES(_c, MPI_Count, MPI_Aint)
#endif
