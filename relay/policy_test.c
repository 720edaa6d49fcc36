/* Unit tests (TAP) of the dynamic relay's refused ports: relay/policy.c. */
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
	return tap_done();
}
