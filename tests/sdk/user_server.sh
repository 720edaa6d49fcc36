#!/bin/bash
# Test only: a user's own HTTP server in the guest for getHost(3000), made of
# what the e2b-rt tree has (bash, socat; it has no python3). The probes write
# it into the sandbox with the SDK and run it as
#   socat TCP-LISTEN:3000,bind=127.0.0.1,reuseaddr,fork EXEC:<this file>
# One request per connection: GET <path> answers the file <dir of this file><path>.
read -r _ target _
while IFS= read -r header && [ -n "${header%$'\r'}" ]; do :; done
file=$(dirname "$0")$target
if [ -f "$file" ]; then
	printf 'HTTP/1.1 200 OK\r\nContent-Length: %s\r\nConnection: close\r\n\r\n' "$(stat -c %s "$file")"
	cat "$file"
else
	printf 'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'
fi
