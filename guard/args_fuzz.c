/* libFuzzer target for the hand-written --ports / --alias parsers.
 * The input's first byte picks the parser; the rest is the argument. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct guard_config config;
	char why[256];
	char *text;

	if (size == 0)
		return 0;
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	memset(&config, 0, sizeof(config));
	if (data[0] & 1) {
		if (guard_parse_alias(text, &config, why, sizeof(why)) == 0 && config.alias.s_addr == 0)
			abort(); /* 0.0.0.0 must never be accepted */
	} else if (guard_parse_ports(text, &config, why, sizeof(why)) == 0) {
		if (config.n_ports == 0 || config.n_ports > GUARD_MAX_PORTS)
			abort();
		for (size_t i = 0; i < config.n_ports; i++) {
			if (config.ports[i] == 0)
				abort();
			for (size_t j = i + 1; j < config.n_ports; j++)
				if (config.ports[i] == config.ports[j])
					abort();
		}
	}
	free(text);
	return 0;
}
