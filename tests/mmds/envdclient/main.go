// envdclient follows envd's MMDS flows (packages/envd/internal/host/mmds.go)
// with Go's net/http, the stack envd uses: PUT /latest/api/token with the
// header name spelled exactly as envd writes it, then GET / with the token
// and Accept: application/json, decoded into envd's fields. Status codes are
// ignored, as envd ignores them. Two flows, each with envd's own client:
//   -flow poll  (PollForMMDSOpts, at start): Go's default client, keep-alive
//               on, no client time-out; every 50 ms until a body parses.
//   -flow init  (GetAccessTokenHashFromMMDS, on /init): keep-alives off, a
//               10 s client time-out, one attempt.
// A test stand-in: it lives under tests/ and never ships.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

type mmdsOpts struct {
	SandboxID            string `json:"instanceID"`
	TemplateID           string `json:"envID"`
	LogsCollectorAddress string `json:"address"`
	AccessTokenHash      string `json:"accessTokenHash"`
}

type result struct {
	Attempts        int    `json:"attempts"`
	Token           string `json:"token"`
	InstanceID      string `json:"instanceID"`
	EnvID           string `json:"envID"`
	Address         string `json:"address"`
	AccessTokenHash string `json:"accessTokenHash"`
	LastError       string `json:"lastError,omitempty"`
}

func getToken(ctx context.Context, client *http.Client, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/latest/api/token", new(bytes.Buffer))
	if err != nil {
		return "", err
	}
	// Set directly, so the name is not canonicalized: envd does the same.
	req.Header["X-metadata-token-ttl-seconds"] = []string{"60"}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if len(body) == 0 {
		return "", fmt.Errorf("mmds token is an empty string")
	}
	return string(body), nil
}

func getOpts(ctx context.Context, client *http.Client, base, token string) (*mmdsOpts, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", new(bytes.Buffer))
	if err != nil {
		return nil, err
	}
	req.Header["X-metadata-token"] = []string{token}
	req.Header["Accept"] = []string{"application/json"}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var opts mmdsOpts
	if err := json.Unmarshal(body, &opts); err != nil {
		return nil, fmt.Errorf("status %d: %w", resp.StatusCode, err)
	}
	return &opts, nil
}

func main() {
	base := flag.String("base", "http://169.254.169.254", "MMDS base URL")
	deadline := flag.Duration("deadline", 10*time.Second, "give up after this long")
	flow := flag.String("flow", "poll", "poll (envd's start) or init (envd's /init hash check)")
	flag.Parse()

	client := &http.Client{}
	once := false
	switch *flow {
	case "poll":
	case "init":
		client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		once = true
	default:
		fmt.Fprintf(os.Stderr, "envdclient: -flow %q: want poll or init\n", *flow)
		os.Exit(2)
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), *deadline)
	defer cancel()

	var res result
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for {
		res.Attempts++
		token, err := getToken(ctx, client, *base)
		if err == nil {
			res.Token = token
			var opts *mmdsOpts
			opts, err = getOpts(ctx, client, *base, token)
			if err == nil {
				res.InstanceID = opts.SandboxID
				res.EnvID = opts.TemplateID
				res.Address = opts.LogsCollectorAddress
				res.AccessTokenHash = opts.AccessTokenHash
				_ = json.NewEncoder(os.Stdout).Encode(res)
				return
			}
		}
		res.LastError = err.Error()
		if once {
			_ = json.NewEncoder(os.Stdout).Encode(res)
			os.Exit(1)
		}
		select {
		case <-ctx.Done():
			_ = json.NewEncoder(os.Stdout).Encode(res)
			os.Exit(1)
		case <-ticker.C:
		}
	}
}
