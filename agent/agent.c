/*
 * libmspti.so load and fork handling.  The constructor only reads the
 * environment and starts one thread, so loading the agent costs the
 * application well under a millisecond.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "util.h"
#include "api.h"
#include "agent.h"

struct agent_config agent_config;
static uint64_t agent_loaded_ns;

uint64_t
agent_start_ns(void)
{
	return agent_loaded_ns;
}

static void
agent_atfork_child(void)
{
	if (!agent_config.disabled)
		register_after_fork_child();
}

__attribute__((constructor)) static void
agent_init(void)
{
	const char *dir, *v;

	agent_loaded_ns = util_realtime_ns();
	v = getenv("MSPTI_DISABLE");
	agent_config.disabled = v != NULL && *v != '\0' && strcmp(v, "0") != 0;
	v = getenv("MSPTI_DEBUG");
	agent_config.debug = v != NULL && *v != '\0' && strcmp(v, "0") != 0;
	log_init("libmspti", agent_config.debug ? LOG_DEST_STDERR :
	    LOG_DEST_NONE, agent_config.debug ? 2 : 0);
	if (agent_config.disabled)
		return;
	dir = util_runtime_dir(NULL);
	if (strlen(dir) + sizeof("/agent.sock") > sizeof(agent_config.rundir)) {
		log_warnx("runtime dir too long, not registering: %s", dir);
		return;
	}
	strcpy(agent_config.rundir, dir);
	/* A daemon is there: count steps from the first (activity.c). */
	{
		char sock[sizeof(agent_config.rundir) + 16];
		struct stat st;

		snprintf(sock, sizeof(sock), "%s/agent.sock", dir);
		if (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode))
			api_mstx_count_steps(true);
	}
	pthread_atfork(NULL, NULL, agent_atfork_child);
	gate_init();
	if (register_start() != 0) {
		gate_open();
		api_mstx_count_steps(false);
		log_warnx("cannot start the registration thread");
	}
}
