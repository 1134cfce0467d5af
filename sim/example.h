/*
 * example.h - helpers shared by the npusim example workloads.
 */
#ifndef EXAMPLE_H
#define EXAMPLE_H

#include <signal.h>
#include <stdint.h>

#include <acl/acl.h>

extern volatile sig_atomic_t example_stop;

void		 example_signals(void);
double		 example_now_ms(void);
uint64_t	 example_range_start(const char *, aclrtStream);
void		 example_range_end(uint64_t);
aclrtFuncHandle	 example_kernel(const char *, int, double, double);
int		 example_check(aclError, const char *);

#endif /* EXAMPLE_H */
