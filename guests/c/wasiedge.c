/* wasiedge: WASI preview 1 edge cases, called directly (not through libc's POSIX layer), one line each:
 * "CHECK RESULT" where RESULT is "ok", a value, or the errno the host answered (its number). Needs a
 * preopened, writable directory as fd 3 (it works in a scratch directory it makes and removes there).
 * Exit status 0 when every check ran (a check's answer is printed, never judged here).
 *   wasiedge common  the checks on which every conforming host agrees (compared with wasmtime's WASI)
 *   wasiedge kuro    answers particular to kuro's WASI (allocate, CPU clocks, times, symlinks, rights: where
 *                    wasmtime answers otherwise — it ignores fd rights, has no fd_allocate, real file times)
 *                    and, through a directory descriptor opened with fewer rights, every call that needs
 *                    one of them (ENOTCAPABLE, 76), with what the full descriptor sees after each
 *   wasiedge deny    each call a capability governs, on the preopen itself and stdin (no scratch directory):
 *                    run under a partial grant, the refused ones answer EACCES (2) */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <wasi/api.h>

#define SCRATCH "wasiedge.scratch"

int32_t raw_path_open(int32_t fd, int32_t dirflags, int32_t path, int32_t path_len, int32_t oflags,
                      int64_t base, int64_t inheriting, int32_t fdflags, int32_t fd_out)
    __attribute__((__import_module__("wasi_snapshot_preview1"), __import_name__("path_open")));

int32_t raw_proc_raise(int32_t signal)
    __attribute__((__import_module__("wasi_snapshot_preview1"), __import_name__("proc_raise")));

static int dir = -1;

static void say(const char *check, __wasi_errno_t e) {
    if (e == 0) printf("%s ok\n", check);
    else printf("%s errno %u\n", check, (unsigned)e);
}

static void value(const char *check, __wasi_errno_t e, unsigned long long v) {
    if (e == 0) printf("%s = %llu\n", check, v);
    else printf("%s errno %u\n", check, (unsigned)e);
}

static __wasi_fd_t open_at(__wasi_fd_t at, const char *path, __wasi_oflags_t oflags, __wasi_rights_t base,
                           __wasi_errno_t *e) {
    __wasi_fd_t fd = (__wasi_fd_t)-1;
    *e = __wasi_path_open(at, 0, path, oflags, base, base, 0, &fd);
    return fd;
}

static const __wasi_rights_t RW = __WASI_RIGHTS_FD_READ | __WASI_RIGHTS_FD_WRITE | __WASI_RIGHTS_FD_SEEK |
                                  __WASI_RIGHTS_FD_TELL | __WASI_RIGHTS_FD_FILESTAT_GET |
                                  __WASI_RIGHTS_FD_FILESTAT_SET_SIZE | __WASI_RIGHTS_FD_FILESTAT_SET_TIMES |
                                  __WASI_RIGHTS_FD_ALLOCATE;

/* Every right, and the ones a directory cannot have (opening one with them is EISDIR). */
static const __wasi_rights_t ALL = ((__wasi_rights_t)1 << 30) - 1;
static const __wasi_rights_t WRITES = __WASI_RIGHTS_FD_WRITE | __WASI_RIGHTS_FD_DATASYNC | __WASI_RIGHTS_FD_ALLOCATE |
                                      __WASI_RIGHTS_FD_FILESTAT_SET_SIZE;

static void put(__wasi_fd_t fd, const char *text) {
    __wasi_ciovec_t iov = {(const uint8_t *)text, strlen(text)};
    __wasi_size_t n;
    __wasi_errno_t e = __wasi_fd_write(fd, &iov, 1, &n);
    if (e != 0) say("put", e);
}

static void common(void) {
    __wasi_errno_t e;
    char name[8];
    say("prestat_dir_name len 0", __wasi_fd_prestat_dir_name(3, (uint8_t *)name, 0));
    uint8_t byte;
    __wasi_iovec_t iov = {&byte, 1};
    __wasi_size_t n;
    say("fd_read of a directory", __wasi_fd_read(dir, &iov, 1, &n));
    __wasi_filesize_t pos;
    say("fd_seek of a directory", __wasi_fd_seek(dir, 0, __WASI_WHENCE_CUR, &pos));
    say("fd_seek of stdout", __wasi_fd_seek(1, 0, __WASI_WHENCE_CUR, &pos));
    say("fd_tell of stdout", __wasi_fd_tell(1, &pos));
    say("fd_write to stdin", __wasi_fd_write(0, (const __wasi_ciovec_t *)&iov, 1, &n));
    say("fd_read of stdout", __wasi_fd_read(1, &iov, 1, &n));
    say("fd_sync of stdout", __wasi_fd_sync(1));
    say("fd_close of fd 99", __wasi_fd_close(99));
    say("sock_shutdown of the preopen", __wasi_sock_shutdown(3, __WASI_SDFLAGS_RD));
    say("sock_shutdown of fd 99", __wasi_sock_shutdown(99, __WASI_SDFLAGS_RD));
    __wasi_fd_t accepted;
    say("sock_accept of the preopen", __wasi_sock_accept(3, 0, &accepted));
    say("sock_accept of fd 99", __wasi_sock_accept(99, 0, &accepted));
    __wasi_roflags_t roflags;
    say("sock_recv of stdin", __wasi_sock_recv(0, &iov, 1, 0, &n, &roflags));
    say("sock_recv of fd 99", __wasi_sock_recv(99, &iov, 1, 0, &n, &roflags));
    say("sock_send of stdout", __wasi_sock_send(1, (const __wasi_ciovec_t *)&iov, 1, 0, &n));
    say("sock_send of fd 99", __wasi_sock_send(99, (const __wasi_ciovec_t *)&iov, 1, 0, &n));
    say("fd_prestat_get of fd 99", __wasi_fd_prestat_get(99, &(__wasi_prestat_t){0}));
    open_at(dir, ".", __WASI_OFLAGS_DIRECTORY, __WASI_RIGHTS_FD_READ | __WASI_RIGHTS_FD_WRITE, &e);
    say("open . for writing", e);
    open_at(dir, "/etc/passwd", 0, __WASI_RIGHTS_FD_READ, &e);
    say("open an absolute path", e);
    open_at(dir, "../x", 0, __WASI_RIGHTS_FD_READ, &e);
    say("open above the directory", e);
    __wasi_fd_t fd_out;
    static const char with_nul[] = "a\0b";
    say("open a path holding NUL", (__wasi_errno_t)raw_path_open((int32_t)dir, 0, (int32_t)(uintptr_t)with_nul, 3,
                                                                  __WASI_OFLAGS_CREAT, (int64_t)RW, 0, 0,
                                                                  (int32_t)(uintptr_t)&fd_out));
    open_at(dir, "missing", 0, __WASI_RIGHTS_FD_READ, &e);
    say("open a missing file", e);

    __wasi_fd_t f = open_at(dir, "f", __WASI_OFLAGS_CREAT | __WASI_OFLAGS_EXCL, RW, &e);
    say("create f", e);
    open_at(dir, "f", __WASI_OFLAGS_CREAT | __WASI_OFLAGS_EXCL, RW, &e);
    say("create f again, exclusive", e);
    open_at(dir, "f/", 0, __WASI_RIGHTS_FD_READ, &e);
    say("open f/", e);
    open_at(dir, "f", __WASI_OFLAGS_DIRECTORY, __WASI_RIGHTS_FD_READ, &e);
    say("open f as a directory", e);
    const struct {
        const char *what, *path;
        __wasi_oflags_t oflags;
    } dir_opens[] = {{"create f as a directory", "f", __WASI_OFLAGS_CREAT},
                     {"truncate f as a directory", "f", __WASI_OFLAGS_TRUNC},
                     {"open f exclusive as a directory", "f", __WASI_OFLAGS_EXCL},
                     {"create . as a directory", ".", __WASI_OFLAGS_CREAT},
                     {"truncate . as a directory", ".", __WASI_OFLAGS_TRUNC},
                     {"create a missing directory", "nodir", __WASI_OFLAGS_CREAT | __WASI_OFLAGS_EXCL}};
    for (unsigned i = 0; i < sizeof dir_opens / sizeof *dir_opens; i++) {
        open_at(dir, dir_opens[i].path, __WASI_OFLAGS_DIRECTORY | dir_opens[i].oflags, __WASI_RIGHTS_FD_READ, &e);
        say(dir_opens[i].what, e);
    }
    put(f, "hello");
    e = __wasi_fd_seek(f, 2, __WASI_WHENCE_SET, &pos);
    value("seek to 2", e, pos);
    e = __wasi_fd_tell(f, &pos);
    value("tell", e, pos);
    e = __wasi_fd_seek(f, -10, __WASI_WHENCE_CUR, &pos);
    say("seek before 0", e);
    __wasi_ciovec_t tail = {(const uint8_t *)"XY", 2};
    e = __wasi_fd_pwrite(f, &tail, 1, 10, &n);
    value("pwrite past the end", e, n);
    __wasi_filestat_t fst;
    e = __wasi_fd_filestat_get(f, &fst);
    value("size after the pwrite", e, fst.size);
    uint8_t buf[32];
    __wasi_iovec_t rd = {buf, sizeof buf};
    e = __wasi_fd_pread(f, &rd, 1, 0, &n);
    value("pread from 0", e, n);
    if (e == 0) printf("pread bytes %d %d %d %d\n", buf[4], buf[5], buf[9], buf[10]);
    e = __wasi_fd_pread(f, &rd, 1, 100, &n);
    value("pread past the end", e, n);
    e = __wasi_fd_filestat_set_size(f, 3);
    say("set size 3", e);
    say("datasync f", __wasi_fd_datasync(f));
    say("sync f", __wasi_fd_sync(f));
    e = __wasi_fd_filestat_get(f, &fst);
    value("size", e, fst.size);
    say("set_times with MTIM and MTIM_NOW", __wasi_fd_filestat_set_times(f, 0, 0, __WASI_FSTFLAGS_MTIM |
                                                                                  __WASI_FSTFLAGS_MTIM_NOW));
    say("set_times with ATIM and ATIM_NOW", __wasi_fd_filestat_set_times(f, 0, 0, __WASI_FSTFLAGS_ATIM |
                                                                                  __WASI_FSTFLAGS_ATIM_NOW));

    __wasi_fd_t g = open_at(dir, "g", __WASI_OFLAGS_CREAT, 0, &e);
    say("create g with no rights", e);
    say("renumber f onto g", __wasi_fd_renumber(f, g));
    say("close f after the renumber", __wasi_fd_close(f));
    e = __wasi_fd_filestat_get(g, &fst);
    value("g is now f: size", e, fst.size);
    say("renumber onto a closed fd", __wasi_fd_renumber(g, 99));

    __wasi_fd_t ro = open_at(dir, "g", 0, __WASI_RIGHTS_FD_READ, &e);
    say("open g read-only", e);
    e = __wasi_fd_pwrite(ro, &tail, 1, 0, &n);
    say("pwrite to a read-only descriptor", e);
    say("set_size of a read-only descriptor", __wasi_fd_filestat_set_size(ro, 0));
    say("readdir of a file", __wasi_fd_readdir(ro, buf, sizeof buf, 0, &n));
    say("close g read-only", __wasi_fd_close(ro));
    e = __wasi_fd_pwrite(1, &tail, 1, 0, &n);
    say("pwrite to stdout", e);
    e = __wasi_fd_pwrite(dir, &tail, 1, 0, &n);
    say("pwrite to a directory", e);
    e = __wasi_fd_pwrite(99, &tail, 1, 0, &n);
    say("pwrite to fd 99", e);
    say("set_size of stdout", __wasi_fd_filestat_set_size(1, 0));
    say("set_size of a directory", __wasi_fd_filestat_set_size(dir, 0));
    say("set_size of fd 99", __wasi_fd_filestat_set_size(99, 0));
    e = __wasi_fd_filestat_get(99, &fst);
    say("filestat_get of fd 99", e);
    say("datasync of stdout", __wasi_fd_datasync(1));
    say("datasync of fd 99", __wasi_fd_datasync(99));
    say("readdir of fd 99", __wasi_fd_readdir(99, buf, sizeof buf, 0, &n));
    say("readdir of stdout", __wasi_fd_readdir(1, buf, sizeof buf, 0, &n));

    say("unlink f while open", __wasi_path_unlink_file(dir, "f"));
    put(g, "!");
    e = __wasi_fd_pread(g, &rd, 1, 0, &n);
    value("read the unlinked file", e, n);
    say("close it", __wasi_fd_close(g));
    e = __wasi_path_filestat_get(dir, 0, "f", &fst);
    say("stat f after unlink", e);

    say("mkdir d", __wasi_path_create_directory(dir, "d"));
    say("mkdir d again", __wasi_path_create_directory(dir, "d"));
    say("mkdir d/e", __wasi_path_create_directory(dir, "d/e"));
    for (int i = 0; i < 3; i++) {
        char p[8];
        snprintf(p, sizeof p, "d/%c", 'x' + i);
        __wasi_fd_t h = open_at(dir, p, __WASI_OFLAGS_CREAT, RW, &e);
        if (e == 0) (void)__wasi_fd_close(h);
    }
    say("rmdir a non-empty directory", __wasi_path_remove_directory(dir, "d"));
    say("unlink a directory", __wasi_path_unlink_file(dir, "d"));
    say("rmdir a file", __wasi_path_remove_directory(dir, "d/x"));
    say("rename d into d/e", __wasi_path_rename(dir, "d", dir, "d/e/f"));
    say("rename d/x over d/e", __wasi_path_rename(dir, "d/x", dir, "d/e"));
    say("rename d/e over d/y", __wasi_path_rename(dir, "d/e", dir, "d/y"));
    say("rename a missing file", __wasi_path_rename(dir, "nope", dir, "d/z"));
    e = __wasi_path_filestat_get(dir, 0, "d/x/", &fst);
    say("stat d/x/", e);

    __wasi_fd_t d = open_at(dir, "d", __WASI_OFLAGS_DIRECTORY, __WASI_RIGHTS_FD_READDIR |
                            __WASI_RIGHTS_FD_FILESTAT_GET | __WASI_RIGHTS_PATH_OPEN |
                            __WASI_RIGHTS_PATH_FILESTAT_GET, &e);
    say("open d", e);
    __wasi_filestat_t dst;
    (void)__wasi_fd_filestat_get(d, &dst);
    int entries = 0, dot_ino = 0;
    __wasi_dircookie_t cookie = 0;
    for (int round = 0; round < 20; round++) {
        uint8_t dbuf[40];
        __wasi_size_t used;
        e = __wasi_fd_readdir(d, dbuf, sizeof dbuf, cookie, &used);
        if (e != 0) {
            say("readdir", e);
            break;
        }
        __wasi_size_t at = 0;
        while (at + sizeof(__wasi_dirent_t) <= used) {
            __wasi_dirent_t ent;
            memcpy(&ent, dbuf + at, sizeof ent);
            if (at + sizeof ent + ent.d_namlen > used) break;
            if (ent.d_namlen == 1 && dbuf[at + sizeof ent] == '.') dot_ino = ent.d_ino == dst.ino;
            entries++;
            cookie = ent.d_next;
            at += sizeof ent + ent.d_namlen;
        }
        if (used < sizeof dbuf) break;
    }
    printf("readdir in 40-byte pieces: %d entries, . is d itself: %d\n", entries, dot_ino);
    e = __wasi_path_filestat_get(d, 0, "x", &fst);
    value("stat x through d: filetype", e, fst.filetype);
    say("close d", __wasi_fd_close(d));

    __wasi_event_t ev;
    __wasi_subscription_t sub;
    memset(&sub, 0, sizeof sub);
    sub.userdata = 42;
    sub.u.tag = __WASI_EVENTTYPE_CLOCK;
    sub.u.u.clock.id = __WASI_CLOCKID_MONOTONIC;
    sub.u.u.clock.timeout = 1000000;
    e = __wasi_poll_oneoff(&sub, &ev, 1, &n);
    printf("poll a 1 ms clock: errno %u, %u event(s), userdata %llu, type %u\n", (unsigned)e, (unsigned)n,
           (unsigned long long)ev.userdata, (unsigned)ev.type);
    say("poll nothing", __wasi_poll_oneoff(&sub, &ev, 0, &n));
    const struct {
        const char *what;
        __wasi_clockid_t id;
        __wasi_subclockflags_t flags;
    } clocks[] = {{"the process CPU-time clock", __WASI_CLOCKID_PROCESS_CPUTIME_ID, 0},
                  {"the thread CPU-time clock", __WASI_CLOCKID_THREAD_CPUTIME_ID, 0},
                  {"clock 7", 7, 0},
                  {"clock 7 at an absolute time", 7, __WASI_SUBCLOCKFLAGS_SUBSCRIPTION_CLOCK_ABSTIME},
                  {"a clock with flag bit 1", __WASI_CLOCKID_MONOTONIC, 2}};
    for (unsigned i = 0; i < sizeof clocks / sizeof *clocks; i++) {
        __wasi_subscription_t two[2];
        memcpy(&two[0], &sub, sizeof sub);
        memcpy(&two[1], &sub, sizeof sub);
        two[0].u.u.clock.timeout = 0;
        two[1].u.u.clock.id = clocks[i].id;
        two[1].u.u.clock.flags = clocks[i].flags;
        __wasi_event_t evs[2];
        n = 77;
        e = __wasi_poll_oneoff(two, evs, 2, &n);
        printf("poll %s beside a due one: errno %u, %u event(s)\n", clocks[i].what, (unsigned)e, (unsigned)n);
    }
    const struct {
        const char *what;
        __wasi_eventtype_t tag;
        __wasi_fd_t fd;
    } polls[] = {{"fd 99 for reading", __WASI_EVENTTYPE_FD_READ, 99},
                 {"fd 99 for writing", __WASI_EVENTTYPE_FD_WRITE, 99},
                 {"stdout for writing", __WASI_EVENTTYPE_FD_WRITE, 1},
                 {"stdout for reading", __WASI_EVENTTYPE_FD_READ, 1},
                 {"a directory for reading", __WASI_EVENTTYPE_FD_READ, 3},
                 {"a directory for writing", __WASI_EVENTTYPE_FD_WRITE, 3},
                 {"stdin for writing", __WASI_EVENTTYPE_FD_WRITE, 0}};
    for (unsigned i = 0; i < sizeof polls / sizeof *polls; i++) {
        memset(&ev, 0, sizeof ev);
        n = 0;
        sub.u.tag = polls[i].tag;
        sub.u.u.fd_read.file_descriptor = polls[i].fd;
        e = __wasi_poll_oneoff(&sub, &ev, 1, &n);
        printf("poll %s: errno %u, %u event(s), error %u, type %u\n", polls[i].what, (unsigned)e, (unsigned)n,
               (unsigned)ev.error, (unsigned)ev.type);
    }
    say("random_get of 0 bytes", __wasi_random_get(buf, 0));
    say("sched_yield", __wasi_sched_yield());

    const char *rm[] = {"d/x", "d/y", "d/z", "g"};
    for (unsigned i = 0; i < sizeof rm / sizeof *rm; i++) (void)__wasi_path_unlink_file(dir, rm[i]);
    (void)__wasi_path_remove_directory(dir, "d/e");
    say("rmdir d at the end", __wasi_path_remove_directory(dir, "d"));
}

/* A second descriptor of the scratch directory, opened with PATH_OPEN alone and no inheriting rights (rights
 * are set at path_open only: fd_fdstat_set_rights is ENOTSUP, as on wasmtime): every call that needs another
 * right of it is ENOTCAPABLE and changes nothing (the full `dir` checks), and path_open asks for rights within
 * what the directory passes on. Then one that passes on only reading. */
static void rights(void) {
    __wasi_errno_t e;
    __wasi_fd_t f = open_at(dir, "f", __WASI_OFLAGS_CREAT, RW, &e);
    put(f, "abc");
    (void)__wasi_fd_close(f);
    say("mkdir sub", __wasi_path_create_directory(dir, "sub"));
    __wasi_fd_t cut = (__wasi_fd_t)-1;
    e = __wasi_path_open(dir, 0, ".", __WASI_OFLAGS_DIRECTORY, __WASI_RIGHTS_PATH_OPEN, 0, 0, &cut);
    say("open the directory again with path_open alone", e);
    say("  set its rights to none", __wasi_fd_fdstat_set_rights(cut, 0, 0));
    __wasi_fdstat_t st;
    e = __wasi_fd_fdstat_get(cut, &st);
    printf("its rights: base %llu inheriting %llu\n", (unsigned long long)st.fs_rights_base,
           (unsigned long long)st.fs_rights_inheriting);
    __wasi_filestat_t fst;
    say("cut: path_filestat_get", __wasi_path_filestat_get(cut, 0, "f", &fst));
    say("cut: path_filestat_set_times", __wasi_path_filestat_set_times(cut, 0, "f", 0, 1, __WASI_FSTFLAGS_MTIM));
    say("cut: path_create_directory", __wasi_path_create_directory(cut, "nd"));
    say("  made nothing", __wasi_path_filestat_get(dir, 0, "nd", &fst));
    __wasi_fd_t g = (__wasi_fd_t)-1;
    say("cut: path_open with creat", __wasi_path_open(cut, 0, "new", __WASI_OFLAGS_CREAT, 0, 0, 0, &g));
    say("  made nothing", __wasi_path_filestat_get(dir, 0, "new", &fst));
    say("cut: path_open with trunc", __wasi_path_open(cut, 0, "f", __WASI_OFLAGS_TRUNC, 0, 0, 0, &g));
    e = __wasi_path_filestat_get(dir, 0, "f", &fst);
    value("  f's size", e, fst.size);
    say("cut: path_open asking for fd_read", __wasi_path_open(cut, 0, "f", 0, __WASI_RIGHTS_FD_READ, 0, 0, &g));
    say("cut: path_open of sub passing on fd_read",
        __wasi_path_open(cut, 0, "sub", __WASI_OFLAGS_DIRECTORY, 0, __WASI_RIGHTS_FD_READ, 0, &g));
    e = __wasi_path_open(cut, 0, "f", 0, 0, 0, 0, &g);
    say("cut: path_open asking for nothing", e);
    if (e == 0) (void)__wasi_fd_close(g);
    say("cut: path_unlink_file", __wasi_path_unlink_file(cut, "f"));
    say("cut: path_remove_directory", __wasi_path_remove_directory(cut, "sub"));
    say("cut: path_rename from it", __wasi_path_rename(cut, "f", dir, "f2"));
    say("cut: path_rename into it", __wasi_path_rename(dir, "f", cut, "f2"));
    say("  f is still f", __wasi_path_filestat_get(dir, 0, "f", &fst));
    uint8_t buf[64];
    __wasi_size_t used;
    say("cut: path_readlink", __wasi_path_readlink(cut, "f", buf, sizeof buf, &used));
    say("cut: path_symlink", __wasi_path_symlink("f", cut, "link"));
    say("cut: path_link from it", __wasi_path_link(cut, 0, "f", dir, "hard"));
    say("cut: path_link into it", __wasi_path_link(dir, 0, "f", cut, "hard"));
    say("cut: fd_readdir", __wasi_fd_readdir(cut, buf, sizeof buf, 0, &used));
    say("close it", __wasi_fd_close(cut));

    __wasi_fd_t reader = (__wasi_fd_t)-1;
    e = __wasi_path_open(dir, 0, ".", __WASI_OFLAGS_DIRECTORY, __WASI_RIGHTS_PATH_OPEN,
                         __WASI_RIGHTS_FD_READ | __WASI_RIGHTS_FD_SEEK, 0, &reader);
    say("open the directory passing on fd_read and fd_seek", e);
    say("  open f for writing through it", __wasi_path_open(reader, 0, "f", 0, __WASI_RIGHTS_FD_WRITE, 0, 0, &g));
    e = __wasi_path_open(reader, 0, "f", 0, __WASI_RIGHTS_FD_READ | __WASI_RIGHTS_PATH_OPEN, 0, 0, &g);
    say("  open f for reading through it (path_open does not apply to a file: dropped)", e);
    if (e == 0) {
        (void)__wasi_fd_fdstat_get(g, &st);
        printf("  its rights: base %llu inheriting %llu\n", (unsigned long long)st.fs_rights_base,
               (unsigned long long)st.fs_rights_inheriting);
        __wasi_iovec_t iov = {buf, sizeof buf};
        e = __wasi_fd_read(g, &iov, 1, &used);
        value("  read it", e, used);
        say("  fd_filestat_get without the right", __wasi_fd_filestat_get(g, &fst));
        say("  fd_filestat_set_times without the right", __wasi_fd_filestat_set_times(g, 0, 1, __WASI_FSTFLAGS_MTIM));
        (void)__wasi_fd_close(g);
    }
    (void)__wasi_fd_close(reader);
    (void)__wasi_path_unlink_file(dir, "f");
    say("rmdir sub", __wasi_path_remove_directory(dir, "sub"));
}

static void kuro(void) {
    __wasi_errno_t e;
    __wasi_fd_t f = open_at(dir, "f", __WASI_OFLAGS_CREAT, RW, &e);
    say("create f", e);
    say("allocate 0..100", __wasi_fd_allocate(f, 0, 100));
    __wasi_filestat_t fst;
    e = __wasi_fd_filestat_get(f, &fst);
    value("size after allocate", e, fst.size);
    say("set mtim to 12345", __wasi_fd_filestat_set_times(f, 0, 12345, __WASI_FSTFLAGS_MTIM));
    e = __wasi_path_filestat_get(dir, 0, "f", &fst);
    printf("times: atim %llu mtim %llu\n", (unsigned long long)fst.atim, (unsigned long long)fst.mtim);
    __wasi_timestamp_t t;
    say("the process CPU clock", __wasi_clock_time_get(__WASI_CLOCKID_PROCESS_CPUTIME_ID, 1, &t));
    say("symlink", __wasi_path_symlink("f", dir, "link"));
    say("link", __wasi_path_link(dir, 0, "f", dir, "hard"));
    uint8_t buf[8];
    __wasi_size_t used;
    say("readlink of a file", __wasi_path_readlink(dir, "f", buf, sizeof buf, &used));
    __wasi_fdstat_t st;
    (void)__wasi_fd_fdstat_get(f, &st);
    say("add a right", __wasi_fd_fdstat_set_rights(f, st.fs_rights_base | __WASI_RIGHTS_PATH_OPEN, 0));
    say("drop the read right", __wasi_fd_fdstat_set_rights(f, st.fs_rights_base & ~__WASI_RIGHTS_FD_READ, 0));
    __wasi_iovec_t iov = {buf, 1};
    say("read after asking to drop it", __wasi_fd_read(f, &iov, 1, &used));
    __wasi_fd_t g = open_at(dir, "g", __WASI_OFLAGS_CREAT, 0, &e);
    say("create g with no rights", e);
    say("read g without the read right", __wasi_fd_read(g, &iov, 1, &used));
    __wasi_ciovec_t out = {(const uint8_t *)"x", 1};
    say("write g without the write right", __wasi_fd_write(g, &out, 1, &used));
    (void)__wasi_fd_close(g);
    (void)__wasi_path_unlink_file(dir, "g");
    say("proc_raise", (__wasi_errno_t)raw_proc_raise(15));
    (void)__wasi_fd_close(f);
    say("unlink f", __wasi_path_unlink_file(dir, "f"));
    rights();
}

/* Each call a capability governs, straight on the preopen (no scratch directory: the grant may allow no
 * writing) over the tree f, e, d/keep, and on stdin: what the run's grant allows, or EACCES (2). */
static void deny(void) {
    __wasi_errno_t e;
    uint8_t buf[64];
    __wasi_size_t n;
    say("set /'s mtim", __wasi_fd_filestat_set_times(3, 0, 5, __WASI_FSTFLAGS_MTIM));
    e = __wasi_fd_readdir(3, buf, sizeof buf, 0, &n);
    value("fd_readdir of / (bytes)", e, n);
    __wasi_filestat_t fst;
    e = __wasi_path_filestat_get(3, 0, "f", &fst);
    value("path_filestat_get f: size", e, fst.size);
    e = __wasi_path_readlink(3, "f", buf, sizeof buf, &n);
    say("readlink f", e);
    say("set f's mtim", __wasi_path_filestat_set_times(3, 0, "f", 0, 5, __WASI_FSTFLAGS_MTIM));
    __wasi_fd_t f = open_at(3, "f", 0, __WASI_RIGHTS_FD_READ, &e);
    say("open f for reading", e);
    __wasi_iovec_t iov = {buf, sizeof buf};
    e = __wasi_fd_pread(f, &iov, 1, 0, &n);
    value("pread f", e, n);
    (void)__wasi_fd_close(f);
    open_at(3, "new", __WASI_OFLAGS_CREAT, RW, &e);
    say("create new", e);
    open_at(3, "f", __WASI_OFLAGS_TRUNC, RW, &e);
    say("truncate f", e);
    say("mkdir n", __wasi_path_create_directory(3, "n"));
    say("rename f to g", __wasi_path_rename(3, "f", 3, "g"));
    say("unlink d/keep", __wasi_path_unlink_file(3, "d/keep"));
    say("rmdir d", __wasi_path_remove_directory(3, "d"));
    e = __wasi_fd_read(0, &iov, 1, &n);
    value("read stdin", e, n);
    __wasi_subscription_t sub;
    memset(&sub, 0, sizeof sub);
    sub.u.tag = __WASI_EVENTTYPE_FD_READ;
    sub.u.u.fd_read.file_descriptor = 0;
    __wasi_event_t ev;
    memset(&ev, 0, sizeof ev);
    e = __wasi_poll_oneoff(&sub, &ev, 1, &n);
    printf("poll stdin: errno %u, event error %u\n", (unsigned)e, (unsigned)ev.error);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "common";
    if (strcmp(mode, "deny") == 0) {
        deny();
        return 0;
    }
    if (strcmp(mode, "common") == 0) {  /* first: nothing has looked at the preopen's tree yet */
        say("set /'s times", __wasi_fd_filestat_set_times(3, 5000000000ull, 7000000000ull,
                                                          __WASI_FSTFLAGS_ATIM | __WASI_FSTFLAGS_MTIM));
        __wasi_filestat_t top;
        __wasi_errno_t got = __wasi_fd_filestat_get(3, &top);
        value("/'s mtim", got, top.mtim);
    }
    __wasi_errno_t e = __wasi_path_create_directory(3, SCRATCH);
    __wasi_fd_t opened = (__wasi_fd_t)-1;
    if (e == 0) e = __wasi_path_open(3, 0, SCRATCH, __WASI_OFLAGS_DIRECTORY, ALL & ~WRITES, ALL, 0, &opened);
    dir = (int)opened;
    if (e != 0) {
        printf("no scratch directory: errno %u\n", (unsigned)e);
        return 1;
    }
    if (strcmp(mode, "kuro") == 0) kuro();
    else common();
    (void)__wasi_fd_close((__wasi_fd_t)dir);
    say("remove the scratch directory", __wasi_path_remove_directory(3, SCRATCH));
    return 0;
}
