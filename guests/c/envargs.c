/* envargs: print the arguments and the environment a WASI command was given.
 * Output: "argc N", one "argv[I] = <ARG>" line per argument (argv[0] included), "envc N", then the
 * environment entries sorted bytewise, one "env <K=V>" line each (newlines inside a value are printed
 * as \n). With "-g NAME..." after argv[0], prints only "NAME=<value>" or "NAME unset" for each NAME. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static void shown(const char *s) {
    putchar('<');
    for (; *s; s++) {
        if (*s == '\n') fputs("\\n", stdout);
        else putchar(*s);
    }
    putchar('>');
}

static int by_text(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "-g") == 0) {
        for (int i = 2; i < argc; i++) {
            const char *v = getenv(argv[i]);
            if (v == NULL) {
                printf("%s unset\n", argv[i]);
            } else {
                printf("%s=", argv[i]);
                shown(v);
                putchar('\n');
            }
        }
        return 0;
    }
    printf("argc %d\n", argc);
    for (int i = 0; i < argc; i++) {
        printf("argv[%d] = ", i);
        shown(argv[i]);
        putchar('\n');
    }
    size_t n = 0;
    while (environ != NULL && environ[n] != NULL) n++;
    char **sorted = malloc((n + 1) * sizeof *sorted);
    if (sorted == NULL) return 2;
    for (size_t i = 0; i < n; i++) sorted[i] = environ[i];
    qsort(sorted, n, sizeof *sorted, by_text);
    printf("envc %zu\n", n);
    for (size_t i = 0; i < n; i++) {
        printf("env ");
        shown(sorted[i]);
        putchar('\n');
    }
    free(sorted);
    return 0;
}
