/*
 * Step boundaries from the synchronize pattern, for processes that mark no
 * MSTX steps.  Each synchronize call is a token: its call site (module
 * offset, so equal in every rank running the same binary) and the launches
 * its thread made since its previous synchronize.  A training loop repeats
 * the same few tokens every iteration, so the stream of tokens is periodic:
 * the detector looks for the shortest period p (1..STEPDET_PMAX) that the
 * latest tokens repeat three times (at least five tokens), and takes as the
 * step boundary the token of the period that closes the most launches (ties:
 * the larger site; equal tokens: the one ending the largest rotation), so
 * every rank picks the same sync whatever the phase it locked in.
 *
 * After the lock a boundary is recognised by its call site alone when that
 * site occurs once per period (kernel counts may then vary: dynamic shapes,
 * an eval iteration closed by the same call), else by the shortest run of
 * tokens ending at it that occurs once in the period.  The boundaries among
 * the synchronizes seen before the lock are counted then (as far as the
 * history reaches), so the step index counts from the process's start.
 * A pattern not met for STEPDET_LOST synchronizes is dropped and looked for
 * again; counting goes on from where it was.
 *
 * Pure computation: the caller (steps.c) locks.
 */
#include "config.h"

#include <string.h>

#include "agent.h"

static const struct stepdet_tok *
stepdet_tok(const struct stepdet *d, uint64_t back)
{
	return &d->hist[(d->n - 1 - back) % STEPDET_HIST];
}

/* Tokens still in the history. */
static uint64_t
stepdet_have(const struct stepdet *d)
{
	return d->n < STEPDET_HIST ? d->n : STEPDET_HIST;
}

static bool
stepdet_eq(const struct stepdet_tok *a, const struct stepdet_tok *b)
{
	return a->site == b->site && a->launches == b->launches;
}

/* Order of tokens for the boundary choice: launches, then site. */
static int
stepdet_cmp(const struct stepdet_tok *a, const struct stepdet_tok *b)
{
	if (a->launches != b->launches)
		return a->launches < b->launches ? -1 : 1;
	if (a->site != b->site)
		return a->site < b->site ? -1 : 1;
	return 0;
}

/* Does the token `back` syncs ago close a step? */
static bool
stepdet_match(const struct stepdet *d, uint64_t back)
{
	const struct stepdet_tok *b = &d->pat[d->period - 1];

	if (d->by_site)
		return stepdet_tok(d, back)->site == b->site;
	if (back + d->ctx > stepdet_have(d))
		return false;
	for (unsigned j = 0; j < d->ctx; j++)
		if (!stepdet_eq(stepdet_tok(d, back + j),
		    &d->pat[d->period - 1 - j]))
			return false;
	return true;
}

/* per[] is one period in time order; sets the pattern ending at its
 * boundary, how the boundary is recognised; false when it closes no
 * launch (syncs with nothing between them are no loop). */
static bool
stepdet_pattern(struct stepdet *d, const struct stepdet_tok *per, unsigned p)
{
	unsigned b = 0, i, j, L, e, nsite = 0;

	for (i = 1; i < p; i++) {
		int c = stepdet_cmp(&per[i], &per[b]);

		if (c > 0)
			b = i;
		else if (c == 0) {
			/* Equal tokens: the one whose following rotation is
			 * larger (rotations of a minimal period differ). */
			for (j = 1; j <= p; j++) {
				c = stepdet_cmp(&per[(i + j) % p],
				    &per[(b + j) % p]);
				if (c != 0)
					break;
			}
			if (c > 0)
				b = i;
		}
	}
	if (per[b].launches == 0)
		return false;
	for (j = 0; j < p; j++)
		d->pat[j] = per[(b + 1 + j) % p];
	d->period = p;
	for (j = 0; j < p; j++)
		nsite += d->pat[j].site == d->pat[p - 1].site;
	d->by_site = nsite == 1;
	/* The shortest context ending at the boundary found once per cycle. */
	for (L = 1; L <= p; L++) {
		unsigned hits = 0;

		for (e = 0; e < p; e++) {
			for (j = 0; j < L; j++)
				if (!stepdet_eq(&d->pat[(e + p - j) % p],
				    &d->pat[p - 1 - j]))
					break;
			hits += j == L;
		}
		if (hits == 1)
			break;
	}
	d->ctx = L <= p ? L : p;
	return true;
}

/* The shortest period the latest tokens repeat; sets the pattern. */
static bool
stepdet_find(struct stepdet *d)
{
	struct stepdet_tok per[STEPDET_PMAX];

	for (unsigned p = 1; p <= STEPDET_PMAX; p++) {
		uint64_t need = 3 * (uint64_t)p < 5 ? 5 : 3 * (uint64_t)p;
		uint64_t i;

		if (stepdet_have(d) < need)
			break;
		for (i = 0; i + p < need; i++)
			if (!stepdet_eq(stepdet_tok(d, i), stepdet_tok(d, i + p)))
				break;
		if (i + p < need)
			continue;
		for (i = 0; i < p; i++)
			per[i] = *stepdet_tok(d, p - 1 - i);
		if (stepdet_pattern(d, per, p))
			return true;
	}
	return false;
}

void
stepdet_init(struct stepdet *d)
{
	memset(d, 0, sizeof(*d));
}

int
stepdet_feed(struct stepdet *d, uint64_t site, uint32_t launches)
{
	uint64_t since, back, last = 0;
	int r = STEPDET_LOCKED;
	bool found = false;

	d->hist[d->n % STEPDET_HIST].site = site;
	d->hist[d->n % STEPDET_HIST].launches = launches;
	d->n++;
	if (d->period != 0) {
		if (stepdet_match(d, 0)) {
			d->steps++;
			d->last_bound = d->n;
			return STEPDET_STEP;
		}
		if (d->n - d->last_bound < STEPDET_LOST)
			return 0;
		d->period = 0;		/* lost: look again */
	}
	if (!stepdet_find(d))
		return 0;
	/* The boundaries since the last one counted, oldest first. */
	since = d->n - d->last_bound;
	if (since > stepdet_have(d))
		since = stepdet_have(d);
	for (back = since; back-- > 0;)
		if (stepdet_match(d, back)) {
			d->steps++;
			found = true;
			last = back;
		}
	if (found) {
		d->last_bound = d->n - last;
		if (last == 0)
			r |= STEPDET_STEP;
	} else
		d->last_bound = d->n;
	return r;
}
