/* Map a file shared and writable, overwrite [offset, offset+count) with a byte pattern, msync. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s FILE OFFSET COUNT\n", argv[0]); return 2; }
    long offset = atol(argv[2]), count = atol(argv[3]);
    int fd = open(argv[1], O_RDWR);
    if (fd < 0) { perror("open"); return 1; }
    struct stat st;
    if (fstat(fd, &st) != 0) { perror("fstat"); return 1; }
    unsigned char *p = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    for (long i = 0; i < count; i++) p[offset + i] = (unsigned char)(i * 7 + 3);
    if (msync(p, st.st_size, MS_SYNC) != 0) { perror("msync"); return 1; }
    munmap(p, st.st_size);
    close(fd);
    return 0;
}
