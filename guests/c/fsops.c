/* fsops: run a script of filesystem operations given as arguments, one report line per operation.
 *
 *   write PATH TEXT           create or truncate, then write TEXT
 *   append PATH TEXT          O_APPEND write (creates the file)
 *   create PATH               O_CREAT|O_EXCL, nothing written
 *   pwrite PATH OFFSET TEXT   positional write into an existing file (holes read as zeros)
 *   seekwrite PATH OFF WHENCE TEXT   lseek (WHENCE: set, cur or end) then write; prints the offset
 *   truncate PATH SIZE        ftruncate an existing file (shrink or grow)
 *   big PATH SIZE SEED        create or truncate, then write SIZE pattern bytes in 4000-byte writes
 *   read PATH                 the whole file, escaped
 *   pread PATH OFFSET LEN     LEN bytes at OFFSET, escaped
 *   sum PATH                  size and FNV-1a hash of the file (for big files)
 *   stat PATH                 "dir", or "file SIZE"
 *   ls PATH                   the entry names, sorted bytewise
 *   mkdir PATH | rmdir PATH | unlink PATH | rename FROM TO
 *   unlinkopen PATH TEXT      open PATH, unlink it, write TEXT, read it back through the open fd
 *   renameopen FROM TO TEXT   open FROM for append, rename it to TO, then write TEXT through the fd
 *
 * Every operation prints "OP ARGS: ok[ VALUE]" or "OP ARGS: error MESSAGE" (strerror) and the script
 * goes on. Exit status: 0 if every operation succeeded, 1 if one failed, 2 for a malformed script. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

static int failures = 0;

static void fail(void) {
    printf(": error %s\n", strerror(errno));
    failures++;
}

static void escaped(const char *data, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)data[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c >= 0x20 && c < 0x7f) putchar(c);
        else printf("\\x%02x", c);
    }
    putchar('"');
}

static int write_all(int fd, const char *data, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, data, n);
        if (w < 0) return -1;
        data += w;
        n -= (size_t)w;
    }
    return 0;
}

static long long number(const char *text) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || end == text) {
        fprintf(stderr, "fsops: not a number: %s\n", text);
        exit(2);
    }
    return v;
}

/* Read the whole of fd from offset 0 into a fresh buffer; returns its length or -1. */
static ssize_t slurp(int fd, char **out) {
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (buf == NULL) return -1;
    for (;;) {
        if (len == cap) {
            char *more = realloc(buf, cap *= 2);
            if (more == NULL) { free(buf); return -1; }
            buf = more;
        }
        ssize_t n = pread(fd, buf + len, cap - len, (off_t)len);
        if (n < 0) { free(buf); return -1; }
        if (n == 0) break;
        len += (size_t)n;
    }
    *out = buf;
    return (ssize_t)len;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void op_ls(const char *path) {
    DIR *d = opendir(path);
    if (d == NULL) { fail(); return; }
    char *names[4096];
    size_t count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && count < 4096) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names[count++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, count, sizeof *names, by_name);
    printf(": ok");
    for (size_t i = 0; i < count; i++) {
        printf(" %s", names[i]);
        free(names[i]);
    }
    printf("\n");
}

static void op_read_range(const char *path, long long offset, long long len) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { fail(); return; }
    char *buf;
    ssize_t n;
    if (offset < 0) {
        n = slurp(fd, &buf);
    } else if (len < 0 || len > (1 << 24)) {
        errno = EINVAL;
        n = -1;
        buf = NULL;
    } else {
        buf = malloc(len > 0 ? (size_t)len : 1);
        n = buf == NULL ? -1 : pread(fd, buf, (size_t)len, (off_t)offset);
    }
    if (n < 0) { fail(); close(fd); return; }
    printf(": ok %zd ", n);
    escaped(buf, (size_t)n);
    printf("\n");
    free(buf);
    close(fd);
}

static void op_sum(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { fail(); return; }
    static char buf[65536];
    uint64_t h = 14695981039346656037ULL;
    long long total = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0) { fail(); close(fd); return; }
        if (n == 0) break;
        for (ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)buf[i]) * 1099511628211ULL;
        total += n;
    }
    close(fd);
    printf(": ok %lld %016llx\n", total, (unsigned long long)h);
}

static void op_big(const char *path, long long size, long long seed) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) { fail(); return; }
    char block[4000];
    for (long long done = 0; done < size;) {
        size_t n = size - done < (long long)sizeof block ? (size_t)(size - done) : sizeof block;
        for (size_t i = 0; i < n; i++) block[i] = (char)(((done + (long long)i) * 7 + seed) % 251);
        if (write_all(fd, block, n) != 0) { fail(); close(fd); return; }
        done += (long long)n;
    }
    if (close(fd) != 0) { fail(); return; }
    printf(": ok\n");
}

static void open_write(const char *path, int flags, const char *text) {
    int fd = open(path, flags, 0644);
    if (fd < 0) { fail(); return; }
    if (text != NULL && write_all(fd, text, strlen(text)) != 0) { fail(); close(fd); return; }
    if (close(fd) != 0) { fail(); return; }
    printf(": ok\n");
}

static void op_pwrite(const char *path, long long offset, const char *text) {
    int fd = open(path, O_WRONLY);
    if (fd < 0) { fail(); return; }
    ssize_t w = pwrite(fd, text, strlen(text), (off_t)offset);
    if (w < 0) { fail(); close(fd); return; }
    close(fd);
    printf(": ok %zd\n", w);
}

static void op_seekwrite(const char *path, long long offset, const char *whence, const char *text) {
    int how = strcmp(whence, "set") == 0 ? SEEK_SET : strcmp(whence, "cur") == 0 ? SEEK_CUR
            : strcmp(whence, "end") == 0 ? SEEK_END : -1;
    if (how < 0) {
        fprintf(stderr, "fsops: whence is set, cur or end: %s\n", whence);
        exit(2);
    }
    int fd = open(path, O_RDWR);
    if (fd < 0) { fail(); return; }
    off_t at = lseek(fd, (off_t)offset, how);
    if (at < 0) { fail(); close(fd); return; }
    if (write_all(fd, text, strlen(text)) != 0) { fail(); close(fd); return; }
    close(fd);
    printf(": ok %lld\n", (long long)at);
}

static void op_truncate(const char *path, long long size) {
    int fd = open(path, O_WRONLY);
    if (fd < 0) { fail(); return; }
    if (ftruncate(fd, (off_t)size) != 0) { fail(); close(fd); return; }
    close(fd);
    printf(": ok\n");
}

static void op_stat(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) { fail(); return; }
    if (S_ISDIR(st.st_mode)) printf(": ok dir\n");
    else if (S_ISREG(st.st_mode)) printf(": ok file %lld\n", (long long)st.st_size);
    else printf(": ok other\n");
}

static void op_unlinkopen(const char *path, const char *text) {
    int fd = open(path, O_RDWR);
    if (fd < 0) { fail(); return; }
    if (unlink(path) != 0) { fail(); close(fd); return; }
    if (write_all(fd, text, strlen(text)) != 0) { fail(); close(fd); return; }
    char *buf;
    ssize_t n = slurp(fd, &buf);
    close(fd);
    if (n < 0) { fail(); return; }
    printf(": ok ");
    escaped(buf, (size_t)n);
    printf("\n");
    free(buf);
}

static void op_renameopen(const char *from, const char *to, const char *text) {
    int fd = open(from, O_WRONLY | O_APPEND);
    if (fd < 0) { fail(); return; }
    if (rename(from, to) != 0) { fail(); close(fd); return; }
    if (write_all(fd, text, strlen(text)) != 0) { fail(); close(fd); return; }
    if (close(fd) != 0) { fail(); return; }
    printf(": ok\n");
}

static void simple(int rc) {
    if (rc != 0) fail();
    else printf(": ok\n");
}

int main(int argc, char **argv) {
    int i = 1;
    while (i < argc) {
        const char *op = argv[i];
        int need = strcmp(op, "write") == 0 || strcmp(op, "append") == 0 || strcmp(op, "truncate") == 0
                        || strcmp(op, "rename") == 0 || strcmp(op, "unlinkopen") == 0 ? 2
                 : strcmp(op, "pwrite") == 0 || strcmp(op, "big") == 0 || strcmp(op, "pread") == 0
                        || strcmp(op, "renameopen") == 0 ? 3
                 : strcmp(op, "seekwrite") == 0 ? 4
                 : strcmp(op, "create") == 0 || strcmp(op, "read") == 0 || strcmp(op, "sum") == 0
                        || strcmp(op, "stat") == 0 || strcmp(op, "ls") == 0 || strcmp(op, "mkdir") == 0
                        || strcmp(op, "rmdir") == 0 || strcmp(op, "unlink") == 0 ? 1 : -1;
        if (need < 0) {
            fprintf(stderr, "fsops: unknown operation: %s\n", op);
            return 2;
        }
        if (i + need >= argc) {
            fprintf(stderr, "fsops: %s needs %d argument(s)\n", op, need);
            return 2;
        }
        char **a = argv + i + 1;
        printf("%s", op);
        for (int k = 0; k < need; k++) printf(" %s", a[k]);
        fflush(stdout);
        if (strcmp(op, "write") == 0) open_write(a[0], O_WRONLY | O_CREAT | O_TRUNC, a[1]);
        else if (strcmp(op, "append") == 0) open_write(a[0], O_WRONLY | O_CREAT | O_APPEND, a[1]);
        else if (strcmp(op, "create") == 0) open_write(a[0], O_WRONLY | O_CREAT | O_EXCL, NULL);
        else if (strcmp(op, "pwrite") == 0) op_pwrite(a[0], number(a[1]), a[2]);
        else if (strcmp(op, "seekwrite") == 0) op_seekwrite(a[0], number(a[1]), a[2], a[3]);
        else if (strcmp(op, "truncate") == 0) op_truncate(a[0], number(a[1]));
        else if (strcmp(op, "big") == 0) op_big(a[0], number(a[1]), number(a[2]));
        else if (strcmp(op, "read") == 0) op_read_range(a[0], -1, 0);
        else if (strcmp(op, "pread") == 0) op_read_range(a[0], number(a[1]), number(a[2]));
        else if (strcmp(op, "sum") == 0) op_sum(a[0]);
        else if (strcmp(op, "stat") == 0) op_stat(a[0]);
        else if (strcmp(op, "ls") == 0) op_ls(a[0]);
        else if (strcmp(op, "mkdir") == 0) simple(mkdir(a[0], 0755));
        else if (strcmp(op, "rmdir") == 0) simple(rmdir(a[0]));
        else if (strcmp(op, "unlink") == 0) simple(unlink(a[0]));
        else if (strcmp(op, "rename") == 0) simple(rename(a[0], a[1]));
        else if (strcmp(op, "unlinkopen") == 0) op_unlinkopen(a[0], a[1]);
        else if (strcmp(op, "renameopen") == 0) op_renameopen(a[0], a[1], a[2]);
        fflush(stdout);
        i += need + 1;
    }
    return failures ? 1 : 0;
}
