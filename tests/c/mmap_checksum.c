/* Map a file read-only and print its size and FNV-1a 64 checksum: a legacy C reader. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s FILE\n", argv[0]); return 2; }
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) { perror("open"); return 1; }
    struct stat st;
    if (fstat(fd, &st) != 0) { perror("fstat"); return 1; }
    uint64_t hash = 1469598103934665603ULL;
    if (st.st_size > 0) {
        const unsigned char *p = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) { perror("mmap"); return 1; }
        for (off_t i = 0; i < st.st_size; i++) { hash ^= p[i]; hash *= 1099511628211ULL; }
        munmap((void *)p, st.st_size);
    }
    printf("%lld %016llx\n", (long long)st.st_size, (unsigned long long)hash);
    close(fd);
    return 0;
}
