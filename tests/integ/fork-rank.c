/*
 * A launcher that forks one rank and sets RANK in the child only after the
 * child has had time to register (so its Hello says rank -1), then makes
 * the child's first runtime call.  Runs until --until FILE exists.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <acl/acl.h>

int
main(int argc, char **argv)
{
	struct stat st;
	const char *until = argc > 1 ? argv[1] : NULL;
	int status;
	pid_t pid;

	if ((pid = fork()) == 0) {
		usleep(500000);
		setenv("RANK", "5", 1);
		setenv("WORLD_SIZE", "8", 1);
		if (aclrtSetDevice(0) != ACL_SUCCESS)
			_exit(2);
		while (until != NULL && stat(until, &st) != 0)
			usleep(20000);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
