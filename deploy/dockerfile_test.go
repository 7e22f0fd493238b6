package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vllm-prober/vllm_prober/internal/testutil"
)

// dockerfile is the parsed instructions of the Dockerfile, by stage.
type dockerStage struct {
	from, name string
	instr      [][2]string // {INSTRUCTION, arguments}
}

func parseDockerfile(t *testing.T) []dockerStage {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []dockerStage
	var cont string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cont == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cont += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line = cont + line
		cont = ""
		op, args, _ := strings.Cut(line, " ")
		op, args = strings.ToUpper(op), strings.TrimSpace(args)
		if op == "FROM" {
			fields := strings.Fields(args)
			st := dockerStage{from: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				st.name = fields[2]
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if op != "ARG" {
				t.Fatalf("Dockerfile: %s before FROM", op)
			}
			continue
		}
		s := &stages[len(stages)-1]
		s.instr = append(s.instr, [2]string{op, args})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

func (s dockerStage) all(op string) []string {
	var out []string
	for _, in := range s.instr {
		if in[0] == op {
			out = append(out, in[1])
		}
	}
	return out
}

func (s dockerStage) last(op string) string {
	all := s.all(op)
	if len(all) == 0 {
		return ""
	}
	return all[len(all)-1]
}

func execForm(t *testing.T, what, s string) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s %s is not in exec (JSON) form: %v", what, s, err)
	}
	return v
}

// dockerignored reports whether .dockerignore keeps path (slash-separated,
// relative to the repository) out of the build context. It understands the
// forms our .dockerignore uses: plain paths, trailing-slash directories,
// leading-slash anchors and **/ globs.
func dockerignored(t *testing.T, p string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pat := range strings.Split(string(b), "\n") {
		pat = strings.TrimSpace(pat)
		if pat == "" || strings.HasPrefix(pat, "#") {
			continue
		}
		if strings.HasPrefix(pat, "!") {
			t.Fatalf(".dockerignore: exceptions (%s) are not understood by this test", pat)
		}
		pat = strings.Trim(pat, "/")
		if rest, ok := strings.CutPrefix(pat, "**/"); ok {
			if m, _ := filepath.Match(rest, filepath.Base(p)); m {
				return true
			}
			continue
		}
		if m, _ := filepath.Match(pat, p); m || strings.HasPrefix(p, pat+"/") {
			return true
		}
	}
	return false
}

func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, have %d stage(s)", len(stages))
	}
	builder, final := stages[0], stages[len(stages)-1]

	// The builder uses the Go release go.mod asks for and the Makefile's build.
	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if goVer == nil || builder.from != "golang:"+string(goVer[1]) {
		t.Errorf("builder FROM %s, want golang:%s (go.mod)", builder.from, goVer[1])
	}
	if run := strings.Join(builder.all("RUN"), "\n"); !strings.Contains(run, "make build") {
		t.Errorf("builder does not run `make build` (the Makefile's version ldflags): %s", run)
	}

	// The final stage keeps the exporters' shape.
	if !strings.HasPrefix(final.from, "quay.io/prometheus/busybox") && !strings.HasPrefix(final.from, "gcr.io/distroless/static") {
		t.Errorf("final stage FROM %s: want busybox or distroless static", final.from)
	}
	if u := final.last("USER"); u == "" || u == "root" || u == "0" {
		t.Errorf("final stage USER %q: want a non-root user", u)
	}
	if e := final.last("EXPOSE"); e != "10040" {
		t.Errorf("EXPOSE %q, want 10040", e)
	}
	if ep := execForm(t, "ENTRYPOINT", final.last("ENTRYPOINT")); len(ep) != 1 || ep[0] != "/bin/vllm_prober" {
		t.Errorf("ENTRYPOINT %v", ep)
	}
	cmd := execForm(t, "CMD", final.last("CMD"))
	cfg := flagValue(cmd, "config.file")
	if len(cmd) != 1 || cfg == "" {
		t.Fatalf("CMD %v: want just --config.file", cmd)
	}

	// Every file copied from the build context exists and is in the context;
	// the default config is one of them, and binaries come from the builder.
	copied := map[string]string{} // destination -> source
	for _, c := range final.all("COPY") {
		f := strings.Fields(c)
		if strings.HasPrefix(f[0], "--from=") {
			if f[0] != "--from="+builder.name {
				t.Errorf("COPY %s: not from the builder stage %s", c, builder.name)
			}
			copied[f[len(f)-1]] = ""
			continue
		}
		src, dst := f[0], f[len(f)-1]
		if _, err := os.Stat(filepath.Join(repoRoot, src)); err != nil {
			t.Errorf("COPY %s: %v", c, err)
		}
		if dockerignored(t, src) {
			t.Errorf("COPY %s: .dockerignore excludes %s", c, src)
		}
		copied[dst] = src
	}
	if _, ok := copied["/bin/vllm_prober"]; !ok {
		t.Errorf("no COPY of /bin/vllm_prober into the final stage")
	}
	if src, ok := copied[cfg]; !ok || src == "" {
		t.Errorf("default --config.file=%s is not copied from the repository", cfg)
	}

	// The build context holds what the builder needs and not what it must not.
	for _, p := range []string{"go.mod", "go.sum", "Makefile", "cmd/vllm_prober/main.go", "examples/demo.yml", "config/config.go"} {
		if dockerignored(t, p) {
			t.Errorf(".dockerignore excludes %s, which the build needs", p)
		}
	}
	for _, p := range []string{".git", "bin/vllm_prober", "prober/prober.test"} {
		if !dockerignored(t, p) {
			t.Errorf(".dockerignore lets %s into the build context", p)
		}
	}
}

// TestImageBinary does what the image does, without Docker: builds vllm_prober
// with the Makefile (as the builder stage does), installs the default config
// where CMD expects it (under a temporary root), runs ENTRYPOINT + CMD as an
// unprivileged user and checks /metrics carries the build's version.
func TestImageBinary(t *testing.T) {
	if _, err := os.Stat(filepath.Join(repoRoot, "cmd", "vllm_prober", "main.go")); err != nil {
		t.Skipf("cmd/vllm_prober/main.go does not exist yet: %v", err)
	}
	if testing.Short() {
		t.Skip("builds the binary")
	}
	final := parseDockerfile(t)
	stage := final[len(final)-1]
	cmd := execForm(t, "CMD", stage.last("CMD"))
	cfgInImage := flagValue(cmd, "config.file")

	// A world-readable temporary root, so that the unprivileged user can read it.
	root, err := os.MkdirTemp("", "vllm_prober_image")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}

	const version = "9.9.9-imagetest"
	binDir := filepath.Join(root, "bin")
	build := exec.Command("make", "-C", repoRoot, "--no-print-directory", filepath.Join(binDir, "vllm_prober"),
		"BIN_DIR="+binDir, "VERSION="+version, "REVISION=0123abcd", "BRANCH=test")
	// Under `make test` the parent's MAKEFLAGS (command-line variables such as
	// VERSION=...) would reach this make too.
	build.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}

	// Install the COPY sources at their destinations under root.
	for _, c := range stage.all("COPY") {
		f := strings.Fields(c)
		if strings.HasPrefix(f[0], "--from=") {
			continue
		}
		installCopy(t, filepath.Join(repoRoot, f[0]), filepath.Join(root, f[len(f)-1]))
	}

	out, err := exec.Command(filepath.Join(binDir, "vllm_prober"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), version) || !strings.Contains(string(out), "0123abcd") {
		t.Errorf("vllm_prober --version = %q, %v: want version %s and revision from the ldflags", out, err, version)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"--config.file=" + filepath.Join(root, cfgInImage), "--web.listen-address=" + addr}
	run := exec.CommandContext(ctx, filepath.Join(binDir, "vllm_prober"), args...)
	if os.Getuid() == 0 {
		// USER nobody, as in the image.
		run.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	logs, exited := startCommand(t, run)
	defer func() {
		cancel()
		<-exited
	}()

	want := regexp.MustCompile(`(?m)^vllm_prober_build_info\{[^}]*version="` + regexp.QuoteMeta(version) + `"[^}]*\} 1$`)
	var body string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("vllm_prober %s exited: %v\n%s", strings.Join(args, " "), err, logs.String())
		default:
		}
		body, err = get(ctx, "http://"+addr+"/metrics")
		if err == nil && want.MatchString(body) {
			return
		}
	}
	t.Fatalf("/metrics on %s never showed vllm_prober_build_info with version %s; last body:\n%.2000s\nlogs:\n%s", addr, version, body, logs.String())
}

// startCommand starts cmd (made with exec.CommandContext) with its output
// collected; cancelling its context sends SIGTERM. The channel receives Wait's
// result: callers cancel the context and receive from it before returning.
func startCommand(t *testing.T, cmd *exec.Cmd) (*lockedBuffer, chan error) {
	t.Helper()
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return out, exited
}

// installCopy does what COPY src dst does: a file is copied to dst, a
// directory's contents (recursively) into dst.
func installCopy(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatalf("installing COPY %s %s: %v", src, dst, err)
	}
}

// lockedBuffer collects a process's output while the test may read it.
type lockedBuffer struct{ testutil.LogBuffer }

func get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

// TestDockerfileVersion runs the builder's `make build` line as Docker would
// (/bin/sh -c, build args as environment variables, defaults from ARG) with a
// stand-in make that prints its arguments: without a VERSION build arg the
// version is the VERSION file's, with one it is the argument.
func TestDockerfileVersion(t *testing.T) {
	builder := parseDockerfile(t)[0]
	var build string
	for _, r := range builder.all("RUN") {
		if strings.Contains(r, "make build") {
			build = r
		}
	}
	if build == "" {
		t.Fatal("the builder has no RUN make build")
	}
	args := map[string]string{}
	for _, a := range builder.all("ARG") {
		name, def, _ := strings.Cut(a, "=")
		args[name] = strings.Trim(def, `"`)
	}
	if def, ok := args["VERSION"]; !ok || def != "" {
		t.Errorf("ARG VERSION default %q (declared %v): want an empty default, so that the VERSION file applies", def, ok)
	}
	if dockerignored(t, "VERSION") {
		t.Error(".dockerignore excludes VERSION, which the builder reads")
	}
	fileVersion, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}

	ctxDir, binDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ctxDir, "VERSION"), fileVersion, 0o644); err != nil {
		t.Fatal(err)
	}
	fakeMake := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n"
	if err := os.WriteFile(filepath.Join(binDir, "make"), []byte(fakeMake), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, buildArg, want string
	}{
		{"no build arg", "", strings.TrimSpace(string(fileVersion))},
		{"build arg", "1.2.3-rc.1", "1.2.3-rc.1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", build)
			cmd.Dir = ctxDir
			cmd.Env = []string{"PATH=" + binDir + ":/usr/bin:/bin"}
			for name, def := range args {
				v := def
				if name == "VERSION" && c.buildArg != "" {
					v = c.buildArg
				}
				cmd.Env = append(cmd.Env, name+"="+v)
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", build, err, out)
			}
			if lines := strings.Split(string(out), "\n"); !slices.Contains(lines, "VERSION="+c.want) {
				t.Errorf("make got %q, want VERSION=%s", lines, c.want)
			}
		})
	}
}

// TestMakeDockerTags: `make docker` tags the image :VERSION and :latest, so
// that the README's `docker run ... vllm_prober` finds it.
func TestMakeDockerTags(t *testing.T) {
	cmd := exec.Command("make", "-C", repoRoot, "--no-print-directory", "-n", "docker", "VERSION=1.2.3")
	cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n docker: %v\n%s", err, out)
	}
	for _, want := range []string{`-t "vllm_prober:1.2.3"`, `-t "vllm_prober:latest"`, "--build-arg VERSION=1.2.3"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make docker lacks %s:\n%s", want, out)
		}
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`docker run [^\n]* vllm_prober\n`).Match(readme) {
		t.Error("README's docker run no longer runs vllm_prober (:latest)")
	}
}
