package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/pharos-metallo/metallo/platform/auth"
)

// reloadEnvironments changes environments.yaml while the central process
// serves (docs/operations.md#configuration-reloads): it adds an environment
// at another Site, which both roles know once the process logs the reload
// (no restart), then writes a version that does not validate, which is
// refused whole while the previous version stays in use, then puts the
// added version back.
func (d *demo) reloadEnvironments(ctx context.Context) error {
	d.section("environments.yaml changed while both roles serve: a Site added without a restart, a broken version refused")
	const added, addedSite = "beta-hpc", "beta"
	path := d.path("environments.yaml")
	original, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	probe := func() (prov, exec int) {
		prov, _, _ = d.call(ctx, http.MethodGet, "/resource-provisioning/environments/"+added+"/bindings", d.keys["service:execution"], nil, nil)
		exec, _, _ = d.call(ctx, http.MethodGet, "/execution/v1/streams/"+added+"/bindings", d.keys["service:execution"], nil, nil)
		return prov, exec
	}
	if prov, exec := probe(); prov != http.StatusNotFound || exec != http.StatusNotFound {
		return fmt.Errorf("%s before it is configured: provisioning answered %d, execution %d; want 404 from both", added, prov, exec)
	}
	d.say("%s is not configured yet: provisioning and execution both answer 404 unknown-environment", added)
	p, err := auth.ParsePrincipal(auth.KindEnvironment + ":" + added)
	if err != nil {
		return err
	}
	_, entry, err := auth.NewKey(p)
	if err != nil {
		return err
	}
	withAdded := string(original) + fmt.Sprintf("  - id: %s\n    site: %s\n    authority: %s\n    backend: slurm\n    auth:\n      key_sha256: %s\n", added, addedSite, d.base, entry.SHA256)
	if err := d.replaceEnvironments(ctx, withAdded, "configuration file reloaded; the new version is in use", 1); err != nil {
		return err
	}
	if prov, exec := probe(); prov != http.StatusOK || exec != http.StatusOK {
		return fmt.Errorf("%s after the reload: provisioning answered %d, execution %d; want 200 from both", added, prov, exec)
	}
	d.say("%s added at Site %s (backend slurm); the process logged the reload, and both roles now answer 200 for it", added, addedSite)
	if err := d.replaceEnvironments(ctx, withAdded+"    colour: blue\n", "configuration file refused; the previous version stays in use", 1); err != nil {
		return err
	}
	if prov, exec := probe(); prov != http.StatusOK || exec != http.StatusOK {
		return fmt.Errorf("%s after a refused version: provisioning answered %d, execution %d; want 200 from both", added, prov, exec)
	}
	d.say("a version with an unknown field is refused whole and logged; the previous one stays in use (%s still answers 200)", added)
	if err := d.replaceEnvironments(ctx, withAdded, "configuration file reloaded; the new version is in use", 2); err != nil {
		return err
	}
	d.say("metallo_config_reloads_total{file=\"environments\"} on the admin listener counts both outcomes")
	return nil
}

// replaceEnvironments writes body to environments.yaml by a rename (as a
// configuration tool or a Secret volume does) and waits until the central
// log holds the line msg for the environments file n times.
func (d *demo) replaceEnvironments(ctx context.Context, body, msg string, n int) error {
	path := d.path("environments.yaml")
	if err := os.WriteFile(path+".tmp", []byte(body), 0o600); err != nil {
		return err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		log, err := os.ReadFile(d.path("central.log"))
		if err != nil {
			return err
		}
		seen := 0
		for line := range strings.SplitSeq(string(log), "\n") {
			if strings.Contains(line, `"msg":"`+msg+`"`) && strings.Contains(line, `"file":"environments"`) {
				seen++
			}
		}
		if seen >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the central process did not log %q for environments.yaml within a minute (see %s)", msg, rel(d.path("central.log")))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
