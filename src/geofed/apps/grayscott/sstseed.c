/* Preloaded into every process of the Gray-Scott workflow that opens an SST stream.

   ADIOS2 2.12's EVPath (cm.c, CManager_create) seeds with srand48(getpid() + time(NULL))
   and takes the connection manager's ID from lrand48(). Two processes whose pid + time
   at stream open agree get the same ID, and a third process that talks to both treats
   them as one peer: CMinternal_get_conn reuses the connection whose remote ID matches,
   so the reply meant for one reader reaches the other, whose handler dereferences a
   stream pointer of someone else's address space (SIGSEGV, docs/grayscott.md).

   This keeps EVPath's seed and mixes in 64 bits from getrandom(2), so every process's
   ID is drawn independently. Nothing else of the process uses srand48. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

void srand48(long seed)
{
    static void (*real_srand48)(long);
    unsigned long noise = 0;
    if (!real_srand48)
        real_srand48 = (void (*)(long))dlsym(RTLD_NEXT, "srand48");
    if (getrandom(&noise, sizeof noise, 0) != (ssize_t)sizeof noise)
        noise = ((unsigned long)getpid() << 32) ^ (unsigned long)(size_t)&noise;
    real_srand48(seed ^ (long)noise);
}
