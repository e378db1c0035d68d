/* ls -R: list each named directory (default ".") recursively, names sorted bytewise (strcmp).
 * Each directory is a block "PATH:" followed by one line per entry: "d NAME" for a directory,
 * "f SIZE NAME" for a regular file, "? NAME" otherwise, then an empty line; subdirectories follow
 * in the same order. Only what any filesystem agrees on is printed (no inode numbers, link counts,
 * directory sizes or times). An unreadable directory is reported on stderr and makes the status 1. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *out = malloc(n);
    if (out == NULL) {
        perror("ls");
        exit(2);
    }
    snprintf(out, n, "%s/%s", dir, name);
    return out;
}

static int list(const char *path) {
    DIR *d = opendir(path);
    if (d == NULL) {
        fprintf(stderr, "ls: %s: %s\n", path, strerror(errno));
        return 1;
    }
    size_t count = 0, cap = 16;
    char **names = malloc(cap * sizeof *names);
    struct dirent *e;
    errno = 0;
    while (names != NULL && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (count == cap) {
            cap *= 2;
            char **more = realloc(names, cap * sizeof *names);
            if (more == NULL) break;
            names = more;
        }
        names[count++] = strdup(e->d_name);
    }
    int status = 0;
    if (errno != 0) {
        fprintf(stderr, "ls: %s: %s\n", path, strerror(errno));
        status = 1;
    }
    closedir(d);
    if (names == NULL) return 1;
    qsort(names, count, sizeof *names, by_name);
    char *kinds = calloc(count + 1, 1);
    printf("%s:\n", path);
    for (size_t i = 0; i < count; i++) {
        char *full = join(path, names[i]);
        struct stat st;
        if (stat(full, &st) != 0) {
            fprintf(stderr, "ls: %s: %s\n", full, strerror(errno));
            status = 1;
        } else if (S_ISDIR(st.st_mode)) {
            kinds[i] = 'd';
            printf("d %s\n", names[i]);
        } else if (S_ISREG(st.st_mode)) {
            printf("f %lld %s\n", (long long)st.st_size, names[i]);
        } else {
            printf("? %s\n", names[i]);
        }
        free(full);
    }
    printf("\n");
    for (size_t i = 0; i < count; i++) {
        if (kinds[i] == 'd') {
            char *full = join(path, names[i]);
            status |= list(full);
            free(full);
        }
        free(names[i]);
    }
    free(kinds);
    free(names);
    return status;
}

int main(int argc, char **argv) {
    int status = 0;
    if (argc < 2) return list(".");
    for (int i = 1; i < argc; i++) status |= list(argv[i]);
    return status;
}
