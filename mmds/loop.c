/* The server's clock, sweep timer and accept pause (loop.h). */
#include "loop.h"

uint64_t loop_now_usec(struct mmds_server *s)
{
	uint64_t t = 0;
	sd_event_now(s->event, CLOCK_MONOTONIC, &t);
	return t;
}

void loop_schedule_sweep(struct mmds_server *s, uint64_t when)
{
	if (s->sweep_at && s->sweep_at <= when)
		return;
	s->sweep_at = when;
	sd_event_source_set_time(s->sweep, when);
	sd_event_source_set_enabled(s->sweep, SD_EVENT_ONESHOT);
}

void loop_set_accepting(struct mmds_server *s, bool on)
{
	s->accept_paused = !on;
	for (int i = 0; i < s->n_listeners; i++)
		sd_event_source_set_enabled(s->listeners[i].source, on ? SD_EVENT_ON : SD_EVENT_OFF);
}
