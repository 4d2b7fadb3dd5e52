/*
 * geofed's storage timed loops (IOzone semantics), built by setup.sh into
 * <venv>/lib/libgeofed_io.so and loaded by geofed.bench.storage with ctypes.
 *
 * Why C: a cached 4 KiB read costs about a microsecond, of the order of one Python
 * call; the loop must cost what IOzone's costs. Python plans the grid, drops and
 * measures the page cache, and does the statistics; these functions run one pass of
 * one operation over one file and time it.
 *
 * One pass, as IOzone runs it: the file opened with the mode's flags (outside the
 * timed part), every record once with pwrite/pread (sequential, or a random
 * permutation of the records for randread/randwrite), and for writes an fsync
 * inside the timed part (IOzone's -e): without it a buffered write measures a copy
 * into memory, not the storage. `write` unlinks the file first, so it allocates
 * blocks as IOzone's first write does; rewrite and randwrite overwrite them.
 *
 * Data checked: a record starts with a 16-byte stamp, its file offset and the write
 * pass's generation; the rest is a pattern of the generation and the position in the
 * record, set once per pass outside the timed part. Reads compare the stamp inline
 * (one cache line per record: checking a stamp in every 4 KiB block of a 1 MiB record
 * cost a quarter of a cached read's time, the buffer being larger than the L2 cache);
 * gf_io_verify compares every byte of the file, untimed, after a cell's last pass.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { MODE_BUFFERED = 0, MODE_SYNC = 1, MODE_DIRECT = 2 };
enum { OP_WRITE = 0, OP_REWRITE = 1, OP_READ = 2, OP_REREAD = 3, OP_RANDREAD = 4, OP_RANDWRITE = 5 };

#define ALIGN 4096 /* O_DIRECT's buffer alignment */
#define STAMP 16

static int writes(int op)
{
    return op == OP_WRITE || op == OP_REWRITE || op == OP_RANDWRITE;
}

/* The benchmark's only way to open a file, so that a test can read back from
 * /proc/self/fdinfo the flags every pass runs with. Returns the fd or -errno. */
int gf_io_open(const char *path, int mode, int op)
{
    int flags = O_CLOEXEC | (writes(op) ? O_WRONLY : O_RDONLY);
    if (op == OP_WRITE)
        flags |= O_CREAT | O_TRUNC;
    if (mode == MODE_SYNC)
        flags |= O_SYNC;
    else if (mode == MODE_DIRECT)
        flags |= O_DIRECT;
    int fd = open(path, flags, 0600);
    return fd < 0 ? -errno : fd;
}

static void fill_pattern(unsigned char *buf, long len, long gen)
{
    for (long k = 0; k < len; k++)
        buf[k] = (unsigned char)(k * 31 + (k >> 8) * 7 + gen * 101 + 7);
}

static void stamp(unsigned char *rec, long off, long gen)
{
    int64_t s[2] = {off, gen};
    memcpy(rec, s, STAMP);
}

static int stamp_wrong(const unsigned char *rec, long off, long gen)
{
    int64_t s[2];
    memcpy(s, rec, STAMP);
    return s[0] != off || s[1] != gen;
}

/* Record indices in pass order: 0..n-1, or a permutation (Fisher-Yates, xorshift64*)
 * so that a random pass still touches every record once and can be verified. */
static void pass_order(long *idx, long n, int random, uint64_t seed)
{
    for (long i = 0; i < n; i++)
        idx[i] = i;
    if (!random)
        return;
    uint64_t x = seed * 2654435761u + 0x9e3779b97f4a7c15u;
    for (long i = n - 1; i > 0; i--) {
        x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
        long j = (long)((x * 0x2545f4914f6cdd1dull) % (uint64_t)(i + 1));
        long t = idx[i];
        idx[i] = idx[j], idx[j] = t;
    }
}

static double since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) + (t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* One timed pass of `op` over a file of `size` bytes in records of `record` bytes.
 * Writes leave generation `gen`; reads expect it and count the records whose stamp
 * differs in *wrong. *seconds is the timed part. Returns 0 or -errno (-EIO: a short transfer). */
int gf_io_pass(const char *path, int mode, int op, long size, long record, long gen, long seed,
               double *seconds, long *wrong)
{
    long n = size / record;
    unsigned char *buf = NULL;
    long *idx = malloc((size_t)n * sizeof *idx);
    if (!idx || posix_memalign((void **)&buf, ALIGN, (size_t)record)) {
        free(idx);
        return -ENOMEM;
    }
    fill_pattern(buf, record, gen);
    pass_order(idx, n, op == OP_RANDREAD || op == OP_RANDWRITE, (uint64_t)seed);
    int rc = 0;
    if (op == OP_WRITE && unlink(path) && errno != ENOENT)
        rc = -errno;
    int fd = rc ? rc : gf_io_open(path, mode, op);
    if (fd < 0) {
        free(idx);
        free(buf);
        return fd;
    }
    /* A quiet file system first: a read right after the previous pass's fsync ran at a
     * quarter of its speed one time in two here (the journal commit and the writeback it
     * starts landed inside its time); IOzone's phases get the same quiet from starting
     * a process. Outside the clock. */
    if (syncfs(fd))
        rc = -errno;
    int w = writes(op);
    long bad = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n && !rc; i++) {
        long off = idx[i] * record;
        ssize_t done;
        if (w) {
            stamp(buf, off, gen);
            done = pwrite(fd, buf, (size_t)record, off);
        } else {
            done = pread(fd, buf, (size_t)record, off);
            if (done == record)
                bad += stamp_wrong(buf, off, gen);
        }
        if (done != record)
            rc = done < 0 ? -errno : -EIO;
    }
    if (!rc && w && fsync(fd))
        rc = -errno;
    *seconds = since(&t0);
    *wrong = bad;
    close(fd);
    free(idx);
    free(buf);
    return rc;
}

/* Every byte of the file against what a write pass of generation `gen` left there,
 * read with the mode's flags (a direct cell is checked on the device). Untimed.
 * *wrong_bytes counts the bytes that differ. Returns 0 or -errno. */
int gf_io_verify(const char *path, int mode, long size, long record, long gen, long *wrong_bytes)
{
    unsigned char *got = NULL, *want = NULL;
    if (posix_memalign((void **)&got, ALIGN, (size_t)record) ||
        posix_memalign((void **)&want, ALIGN, (size_t)record)) {
        free(got);
        return -ENOMEM;
    }
    fill_pattern(want, record, gen);
    int fd = gf_io_open(path, mode, OP_READ), rc = 0;
    long bad = 0;
    if (fd < 0)
        rc = fd;
    for (long off = 0; !rc && off < size; off += record) {
        ssize_t done = pread(fd, got, (size_t)record, off);
        if (done != record) {
            rc = done < 0 ? -errno : -EIO;
            break;
        }
        stamp(want, off, gen);
        if (memcmp(got, want, (size_t)record))
            for (long k = 0; k < record; k++)
                bad += got[k] != want[k];
    }
    if (fd >= 0)
        close(fd);
    free(got);
    free(want);
    *wrong_bytes = bad;
    return rc;
}

/* The share of the file's pages in the page cache now, from mincore on a mapping
 * (mapping faults nothing in). 0 for an empty file, -1 if it cannot be mapped. */
double gf_io_resident(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st)) {
        close(fd);
        return -1;
    }
    if (st.st_size == 0) {
        close(fd);
        return 0;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return -1;
    long page = sysconf(_SC_PAGESIZE), pages = (st.st_size + page - 1) / page, in = 0;
    unsigned char *vec = malloc((size_t)pages);
    if (!vec || mincore(map, (size_t)st.st_size, vec)) {
        free(vec);
        munmap(map, (size_t)st.st_size);
        return -1;
    }
    for (long i = 0; i < pages; i++)
        in += vec[i] & 1;
    free(vec);
    munmap(map, (size_t)st.st_size);
    return (double)in / (double)pages;
}
