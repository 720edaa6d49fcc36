/* Unit tests (TAP) of the dynamic relay's refused ports: relay/policy.c. */
#include <errno.h>
#include <string.h>

#include "policy.h"
#include "tap.h"

int main(void)
{
	struct relay_policy p;
	char why[128] = "";
	const char *r;

	ok(relay_policy_init(&p, NULL, why, sizeof(why)) == 0, "the guard's default list: %s", why);
	r = relay_policy_refusal(&p, 8888);
	ok(r && strstr(r, "Jupyter"), "8888 refused: %s", r ? r : "(allowed)");
	ok(relay_policy_refusal(&p, 49983) != NULL, "49983 (envd) refused");
	ok(relay_policy_refusal(&p, 49999) != NULL, "49999 (code interpreter) refused");
	ok(relay_policy_refusal(&p, 80) != NULL, "80 (metadata) refused");
	ok(relay_policy_refusal(&p, 8080) == NULL, "8080 allowed");
	ok(relay_policy_refusal(&p, 3000) == NULL, "3000 allowed");
	ok(relay_policy_init(&p, "8888,9000", why, sizeof(why)) == 0 && relay_policy_refusal(&p, 9000) &&
	   relay_policy_refusal(&p, 80) && !relay_policy_refusal(&p, 49983), "--guarded replaces the list, 80 stays");
	ok(relay_policy_init(&p, "8888,x", why, sizeof(why)) < 0 && strstr(why, "--ports"),
	   "a bad list is the guard's own error: %s", why);
	uint16_t lo = 0, hi = 0;
	ok(relay_parse_port_range("32768\t60999\n", &lo, &hi, why, sizeof(why)) == 0 && lo == 32768 && hi == 60999,
	   "the kernel file's form: %u-%u", lo, hi);
	ok(relay_parse_port_range("40000-40100", &lo, &hi, why, sizeof(why)) == 0 && lo == 40000 && hi == 40100,
	   "LO-HI: %u-%u", lo, hi);
	ok(relay_parse_port_range("1 65535", &lo, &hi, why, sizeof(why)) == 0 && lo == 1 && hi == 65535, "1 65535");
	static const char *const bad[] = { "", "-", "40000", "40000-", "-40000", "0-10", "10-65536", "200-100",
					   "1-2-3", "1-2\n\n", "+1-2", "1 - 2", "01x-2", "99999999-1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ok(relay_parse_port_range(bad[i], &lo, &hi, why, sizeof(why)) == -EINVAL, "bad range %zu refused", i);
	ok(relay_policy_init(&p, NULL, why, sizeof(why)) == 0, "default list again");
	p.ephemeral_lo = 32768;
	p.ephemeral_hi = 60999;
	r = relay_policy_refusal(&p, 32768);
	ok(r && strstr(r, "ephemeral"), "32768 refused: %s", r ? r : "(allowed)");
	ok(relay_policy_refusal(&p, 60999) && !relay_policy_refusal(&p, 61000) && !relay_policy_refusal(&p, 32767),
	   "the range's ends are inclusive");
	return tap_done();
}
