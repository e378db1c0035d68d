/* sort: read all of stdin (or the named files, concatenated), sort the lines, write them to stdout.
 * Options (before the files): -r reverse, -u drop repeated lines, -n compare leading integers (then
 * bytewise). Lines compare bytewise (strcmp, the C locale). A last line without a newline gets one.
 * An unreadable file is reported on stderr with status 2 (and nothing is printed). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int reverse = 0, unique = 0, numeric = 0;
static char *text = NULL;
static size_t len = 0, cap = 0;

static int slurp(int fd, const char *name) {
    for (;;) {
        if (cap - len < 65536) {
            cap = cap ? cap * 2 : 1 << 16;
            char *more = realloc(text, cap + 1);
            if (more == NULL) {
                fprintf(stderr, "sort: out of memory\n");
                return 2;
            }
            text = more;
        }
        ssize_t n = read(fd, text + len, cap - len);
        if (n < 0) {
            fprintf(stderr, "sort: %s: %s\n", name, strerror(errno));
            return 2;
        }
        if (n == 0) return 0;
        len += (size_t)n;
    }
}

static int compare(const void *pa, const void *pb) {
    const char *a = *(char *const *)pa, *b = *(char *const *)pb;
    int c = 0;
    if (numeric) {
        long long x = strtoll(a, NULL, 10), y = strtoll(b, NULL, 10);
        c = (x > y) - (x < y);
    }
    if (c == 0) c = strcmp(a, b);
    return reverse ? -c : c;
}

int main(int argc, char **argv) {
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
        for (const char *o = argv[i] + 1; *o; o++) {
            if (*o == 'r') reverse = 1;
            else if (*o == 'u') unique = 1;
            else if (*o == 'n') numeric = 1;
            else {
                fprintf(stderr, "sort: unknown option -%c\n", *o);
                return 2;
            }
        }
    }
    if (i == argc) {
        if (slurp(STDIN_FILENO, "-")) return 2;
    }
    for (; i < argc; i++) {
        int fd = strcmp(argv[i], "-") == 0 ? STDIN_FILENO : open(argv[i], O_RDONLY);
        if (fd < 0) {
            fprintf(stderr, "sort: %s: %s\n", argv[i], strerror(errno));
            return 2;
        }
        if (slurp(fd, argv[i])) return 2;
        if (fd != STDIN_FILENO) close(fd);
    }
    if (text == NULL) return 0;
    size_t lines = 0;
    for (size_t k = 0; k < len; k++) lines += text[k] == '\n';
    if (len > 0 && text[len - 1] != '\n') lines++;
    char **line = malloc((lines + 1) * sizeof *line);
    if (line == NULL) return 2;
    size_t n = 0;
    for (size_t start = 0; start < len;) {
        char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len;
        text[end] = '\0';
        line[n++] = text + start;
        start = end + 1;
    }
    qsort(line, n, sizeof *line, compare);
    for (size_t k = 0; k < n; k++) {
        if (unique && k > 0 && compare(&line[k - 1], &line[k]) == 0) continue;
        fputs(line[k], stdout);
        putchar('\n');
    }
    return 0;
}
