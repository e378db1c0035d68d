/* wc: lines, words and bytes of each named file (or stdin), then a total line when there are several.
 * Words are runs of non-space bytes (isspace in the C locale). Output: "%7ld %7ld %7ld NAME". */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct counts { long lines, words, bytes; };

static char buf[65536];

static int count(int fd, const char *name, struct counts *c) {
    int in_word = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0) return 0;
        if (n < 0) {
            fprintf(stderr, "wc: %s: %s\n", name, strerror(errno));
            return 1;
        }
        c->bytes += n;
        for (ssize_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)buf[i];
            if (ch == '\n') c->lines++;
            if (isspace(ch)) {
                in_word = 0;
            } else if (!in_word) {
                in_word = 1;
                c->words++;
            }
        }
    }
}

static void show(const struct counts *c, const char *name) {
    printf("%7ld %7ld %7ld%s%s\n", c->lines, c->words, c->bytes, name ? " " : "", name ? name : "");
}

int main(int argc, char **argv) {
    struct counts total = {0, 0, 0};
    int status = 0;
    if (argc < 2) {
        struct counts c = {0, 0, 0};
        status = count(STDIN_FILENO, "-", &c);
        show(&c, NULL);
        return status;
    }
    for (int i = 1; i < argc; i++) {
        struct counts c = {0, 0, 0};
        int fd = open(argv[i], O_RDONLY);
        if (fd < 0) {
            fprintf(stderr, "wc: %s: %s\n", argv[i], strerror(errno));
            status = 1;
            continue;
        }
        if (count(fd, argv[i], &c) == 0) {
            show(&c, argv[i]);
            total.lines += c.lines;
            total.words += c.words;
            total.bytes += c.bytes;
        } else {
            status = 1;
        }
        close(fd);
    }
    if (argc > 2) show(&total, "total");
    return status;
}
