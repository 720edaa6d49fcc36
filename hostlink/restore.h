/* `init` and `restore`: see restore.c and hostlink/README.md. */
#ifndef HOSTLINK_RESTORE_H
#define HOSTLINK_RESTORE_H

#include "link.h"

/* `init --token-file FILE|- [--env NAME=VALUE]… [--user NAME] [--workdir DIR]
 * [--volume-mount PATH=NFS_TARGET]… [--ca-bundle FILE] [--lifecycle-id ID]`;
 * argv[0] is "init". Exit code. */
int cmd_init(const struct link *link, int argc, char **argv);

/* `restore --generation N --document FILE --token-file FILE …` (init's
 * options): the clone step, /health, /init, the token check. Exit code. */
int cmd_restore(const struct link *link, int argc, char **argv);

#endif
