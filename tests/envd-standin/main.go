// Command envd-standin is a TEST STAND-IN for E2B's envd. It is never
// shipped: the real envd release binary cannot be downloaded on our build
// machines, so the image tests (tests/image/) build this program, pin it in
// a test lock and pass that lock with recipes=. It is a small Go (stdlib
// only) program that behaves like envd where the image and the boot test can
// observe it:
//
//   - `-version` prints the bare version and a newline (like envd);
//   - it serves GET /health -> 204 on 0.0.0.0:<port> (default 49983), with no
//     bind-address option, like envd;
//   - unless -isnotfc is given, it performs envd's MMDS flow at start: PUT
//     /latest/api/token with "X-metadata-token-ttl-seconds: 60", then GET /
//     with the token and "Accept: application/json", every 50 ms until a body
//     parses as JSON, then writes /run/e2b/.E2B_SANDBOX_ID and
//     /run/e2b/.E2B_TEMPLATE_ID (like internal/host/mmds.go);
//   - POST /init {"accessToken": …} applies envd's token rule (the contract,
//     internal/api/init.go): the current token passes; otherwise, if MMDS has
//     a non-empty accessTokenHash, the token's lowercase hex SHA-512 must
//     equal it (401 if not); with no hash the first /init sets any token.
//     Answers 204 or 401, nothing else of envd's /init; its "envVars" are
//     kept for GET /envs, which answers them as a JSON object (the code
//     interpreter's API server reads it for every context).
package main

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// version is what -version prints; the tests pin it in their lock.
var version = "0.8.0"

type mmdsOpts struct {
	InstanceID      string `json:"instanceID"`
	EnvID           string `json:"envID"`
	Address         string `json:"address"`
	AccessTokenHash string `json:"accessTokenHash"`
}

func mmdsOnce(client *http.Client, base string) (*mmdsOpts, error) {
	req, err := http.NewRequest(http.MethodPut, base+"/latest/api/token", nil)
	if err != nil {
		return nil, err
	}
	// Sent exactly as envd writes it (non-canonical header name).
	req.Header["X-metadata-token-ttl-seconds"] = []string{"60"}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	token, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(token) == 0 {
		return nil, errors.New("empty token")
	}
	req, err = http.NewRequest(http.MethodGet, base+"/", nil)
	if err != nil {
		return nil, err
	}
	req.Header["X-metadata-token"] = []string{string(token)}
	req.Header.Set("Accept", "application/json")
	resp, err = client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var opts mmdsOpts
	if err := json.NewDecoder(resp.Body).Decode(&opts); err != nil {
		return nil, err
	}
	return &opts, nil
}

func pollMMDS(base, runDir string) {
	// envd's start-up poll uses Go's default client: keep-alive on, no
	// client time-out (PollForMMDSOpts).
	client := &http.Client{}
	defer client.CloseIdleConnections()
	for {
		opts, err := mmdsOnce(client, base)
		if err == nil {
			if err := os.MkdirAll(runDir, 0o755); err != nil {
				log.Printf("envd-standin: %s: %v", runDir, err)
				return
			}
			for name, value := range map[string]string{
				".E2B_SANDBOX_ID":  opts.InstanceID,
				".E2B_TEMPLATE_ID": opts.EnvID,
			} {
				p := filepath.Join(runDir, name)
				if err := os.WriteFile(p, []byte(value), 0o666); err != nil {
					log.Printf("envd-standin: %s: %v", p, err)
				}
			}
			log.Printf("envd-standin: mmds: sandbox %q template %q", opts.InstanceID, opts.EnvID)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func main() {
	showVersion := flag.Bool("version", false, "print the version and exit")
	port := flag.Int("port", 49983, "port to listen on (all addresses, like envd)")
	isNotFC := flag.Bool("isnotfc", false, "not Firecracker: skip the MMDS poll")
	mmds := flag.String("mmds", "http://169.254.169.254", "MMDS base URL (tests only)")
	runDir := flag.String("run-dir", "/run/e2b", "where the MMDS ids are written")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return
	}
	if !*isNotFC {
		go pollMMDS(strings.TrimRight(*mmds, "/"), *runDir)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	var mu sync.Mutex
	current := ""
	envVars := map[string]string{}
	base := strings.TrimRight(*mmds, "/")
	mux.HandleFunc("/init", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var body struct {
			AccessToken *string           `json:"accessToken"`
			EnvVars     map[string]string `json:"envVars"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		token := ""
		if body.AccessToken != nil {
			token = *body.AccessToken
		}
		mu.Lock()
		defer mu.Unlock()
		if current != "" && token == current {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		hash := ""
		if !*isNotFC {
			// envd's /init MMDS client: keep-alive off, 10 s time-out.
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			if opts, err := mmdsOnce(client, base); err == nil {
				hash = opts.AccessTokenHash
			}
		}
		sum := sha512.Sum512([]byte(token))
		switch {
		case hash != "" && hex.EncodeToString(sum[:]) != hash:
			log.Printf("envd-standin: /init: token does not match accessTokenHash")
			w.WriteHeader(http.StatusUnauthorized)
			return
		case hash == "" && current != "":
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		current = token
		for k, v := range body.EnvVars {
			envVars[k] = v
		}
		w.WriteHeader(http.StatusNoContent)
	})
	// GET /envs: the environment /init set, as a JSON object, like envd's
	// (the code interpreter's API server reads it for every context).
	mux.HandleFunc("/envs", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(envVars)
	})
	addr := fmt.Sprintf("0.0.0.0:%d", *port)
	log.Printf("envd-standin %s (test stand-in, not envd) listening on %s", version, addr)
	log.Fatal(http.ListenAndServe(addr, mux))
}
