/* The per-stage budget's marker (bench/stages.py): under callgrind, each call dumps the
   instructions counted since the previous one, labelled with the stage they belong to.
   Outside valgrind the client request is a few no-op instructions. */
#include <valgrind/callgrind.h>

void stage_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
