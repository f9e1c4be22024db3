// See fsync_delay.c: this library replaces fsync(2) when preloaded; it has no API of its own.
int fsync(int fd);
