/* The guest's vsock ports: the one definition on the C side. The guest's
 * socket units (units/envd-vsock.socket and the others) listen on the same
 * numbers; tests/relay/test_relay_units.py checks that they agree. */
#ifndef E2B_VSOCK_PORTS_H
#define E2B_VSOCK_PORTS_H

/* Fixed relays: vsock port N -> guest 127.0.0.1:N (systemd-socket-proxyd). */
#define VSOCK_PORT_ENVD             49983u
#define VSOCK_PORT_CODE_INTERPRETER 49999u
/* The dynamic relay (vsock-relay): "CONNECT <loopback port>\n" first. */
#define VSOCK_PORT_RELAY            10000u
/* mmds-serve's control API (Firecracker's PUT/PATCH/GET /mmds). */
#define VSOCK_PORT_MMDS_CONTROL     10052u
/* The clone step (e2b-clone, units/e2b-clone.socket). */
#define VSOCK_PORT_CLONE            10053u

/* The host's CID, the only peer the guest's control listener admits. */
#define VSOCK_CID_HOST 2u

#endif
