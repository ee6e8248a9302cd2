// Command image builds svcgw's container image as a multi-platform OCI
// image layout, checks one, and pushes one to a registry, without a
// container engine and without pulling a base image: the image starts
// from nothing and gets four layers, each a tar this program writes:
//
//  1. /etc/passwd and /etc/group naming the unprivileged user svcgw
//     (uid and gid 65532), /data (the database's volume, owned by it) and
//     /tmp;
//  2. the CA certificates: the build machine's
//     /etc/ssl/certs/ca-certificates.crt (Debian's ca-certificates), which
//     Go's crypto/x509 reads on Linux;
//  3. the time-zone database: the build machine's /usr/share/zoneinfo
//     (Debian's tzdata), where Go's time package looks;
//  4. the static svcgw binary of the platform, from goreleaser's dist/,
//     as /usr/local/bin/svcgw.
//
// Every file time in the layers and the image's creation time are the
// commit's time, and files are written in name order with root (or
// svcgw, for /data) as owner: the same binaries, certificates and zone
// files make the same image digest. Layers 1 to 3 are the same for both
// platforms, so a registry stores them once.
//
// Usage (scripts/image and scripts/release-check run it; it is a module
// of its own so that go-containerregistry stays out of svcgw's):
//
//	image build  -dist DIR -out DIR -version V -commit SHA -date RFC3339 [-source URL]
//	image verify -layout DIR -version V -commit SHA -rootfs TAR
//	image push   -layout DIR REF...
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image is: the contract verify checks and the README shows.
const (
	binPath    = "/usr/local/bin/svcgw"
	dataDir    = "/data"
	uid        = 65532 // the "nonroot" uid of distroless images
	user       = "65532:65532"
	port       = "8080/tcp"
	caBundle   = "/etc/ssl/certs/ca-certificates.crt"
	zoneinfo   = "/usr/share/zoneinfo"
	licence    = "Apache-2.0"
	defaultSrc = "https://github.com/svcgw/svcgw"
)

var env = []string{
	"PATH=/usr/local/bin",
	"SVCGW_DB=" + dataDir + "/svcgw.db",
	"SVCGW_SERVE_ADDR=0.0.0.0:8080",
}

// platforms are the image's, by goreleaser's goarch.
var platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64", Variant: "v8"},
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: image build|verify|push [flags]")
		os.Exit(2)
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "build":
		err = build(args)
	case "verify":
		err = verify(args)
	case "push":
		err = push(args)
	default:
		err = fmt.Errorf("unknown command %q (build, verify, push)", cmd)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "image %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func build(args []string) error {
	fl := flag.NewFlagSet("build", flag.ExitOnError)
	dist := fl.String("dist", "dist", "goreleaser's dist directory (artifacts.json names the binaries)")
	out := fl.String("out", "dist/oci", "the OCI image layout to write (replaced)")
	version := fl.String("version", "", "the release's version")
	commit := fl.String("commit", "", "the commit it is built from")
	date := fl.String("date", "", "the commit's time, RFC 3339: every file time and the creation time")
	source := fl.String("source", defaultSrc, "the source repository's URL")
	_ = fl.Parse(args)
	if *version == "" || *commit == "" || *date == "" {
		return errors.New("-version, -commit and -date are required")
	}
	created, err := time.Parse(time.RFC3339, *date)
	if err != nil {
		return fmt.Errorf("-date: %w", err)
	}
	created = created.UTC()
	bins, err := linuxBinaries(*dist)
	if err != nil {
		return err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "svcgw",
		"org.opencontainers.image.description": "Self-hosted LLM inference gateway: OpenAI, Anthropic and Gemini wire formats, metered and charged in USD",
		"org.opencontainers.image.source":      *source,
		"org.opencontainers.image.url":         *source,
		"org.opencontainers.image.revision":    *commit,
		"org.opencontainers.image.version":     *version,
		"org.opencontainers.image.licenses":    licence,
		"org.opencontainers.image.created":     created.Format(time.RFC3339),
	}

	base, err := baseLayer(created)
	if err != nil {
		return err
	}
	ca, err := filesLayer(created, caBundle)
	if err != nil {
		return err
	}
	tz, err := filesLayer(created, zoneinfo)
	if err != nil {
		return err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		bin, ok := bins[p.Architecture]
		if !ok {
			return fmt.Errorf("%s/artifacts.json names no linux/%s binary", *dist, p.Architecture)
		}
		app, err := binaryLayer(created, bin)
		if err != nil {
			return err
		}
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		img, err = mutate.Append(img,
			mutate.Addendum{Layer: base, History: history(created, "users svcgw (65532), /data, /tmp")},
			mutate.Addendum{Layer: ca, History: history(created, "CA certificates: "+caBundle)},
			mutate.Addendum{Layer: tz, History: history(created, "time zones: "+zoneinfo)},
			mutate.Addendum{Layer: app, History: history(created, "svcgw "+*version+" ("+*commit+"): "+binPath)},
		)
		if err != nil {
			return err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
		cf.Created = v1.Time{Time: created}
		cf.Author = *source
		cf.Config = v1.Config{
			User:         user,
			Env:          env,
			Entrypoint:   []string{binPath},
			Cmd:          []string{"serve"},
			WorkingDir:   dataDir,
			Volumes:      map[string]struct{}{dataDir: {}},
			ExposedPorts: map[string]struct{}{port: {}},
			Labels:       labels,
			StopSignal:   "SIGTERM",
		}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return err
		}
		img = mutate.Annotations(img, labels).(v1.Image)
		plat := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &plat},
		})
	}
	idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
	if err := os.RemoveAll(*out); err != nil {
		return err
	}
	if _, err := layout.Write(*out, idx); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s\n", d, *out)
	return nil
}

func history(t time.Time, what string) v1.History {
	return v1.History{Created: v1.Time{Time: t}, CreatedBy: "deploy/image: " + what}
}

// linuxBinaries are goreleaser's linux binaries by goarch, from
// artifacts.json.
func linuxBinaries(dist string) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(dist, "artifacts.json"))
	if err != nil {
		return nil, err
	}
	var arts []struct {
		Type   string `json:"type"`
		Path   string `json:"path"`
		Goos   string `json:"goos"`
		Goarch string `json:"goarch"`
	}
	if err := json.Unmarshal(raw, &arts); err != nil {
		return nil, fmt.Errorf("%s/artifacts.json: %w", dist, err)
	}
	// Paths are relative to where goreleaser ran: dist's parent.
	top, err := filepath.Abs(filepath.Dir(dist))
	if err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, a := range arts {
		if a.Type == "Binary" && a.Goos == "linux" {
			if !filepath.IsAbs(a.Path) {
				a.Path = filepath.Join(top, a.Path)
			}
			bins[a.Goarch] = a.Path
		}
	}
	return bins, nil
}

// tarWriter writes a layer's entries with the commit's time and, unless
// told otherwise, root as owner.
type tarWriter struct {
	buf bytes.Buffer
	tw  *tar.Writer
	at  time.Time
}

func newTar(at time.Time) *tarWriter {
	w := &tarWriter{at: at}
	w.tw = tar.NewWriter(&w.buf)
	return w
}

func (w *tarWriter) header(h *tar.Header) error {
	h.Name = strings.TrimPrefix(h.Name, "/")
	h.ModTime, h.Format = w.at, tar.FormatPAX
	h.Uname, h.Gname = "", ""
	return w.tw.WriteHeader(h)
}

func (w *tarWriter) dir(name string, mode int64, owner int) error {
	return w.header(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: owner, Gid: owner})
}

func (w *tarWriter) file(name string, mode int64, data []byte) error {
	if err := w.header(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}); err != nil {
		return err
	}
	_, err := w.tw.Write(data)
	return err
}

// parents writes the directories above name, root's, 0755.
func (w *tarWriter) parents(name string) error {
	var dirs []string
	for d := path.Dir(name); d != "/" && d != "."; d = path.Dir(d) {
		dirs = append(dirs, d)
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := w.dir(d, 0o755, 0); err != nil {
			return err
		}
	}
	return nil
}

func (w *tarWriter) layer() (v1.Layer, error) {
	if err := w.tw.Close(); err != nil {
		return nil, err
	}
	data := w.buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

func baseLayer(at time.Time) (v1.Layer, error) {
	w := newTar(at)
	for _, step := range []func() error{
		func() error { return w.dir("/data", 0o700, uid) },
		func() error { return w.dir("/etc", 0o755, 0) },
		func() error {
			return w.file("/etc/group", 0o644, []byte("root:x:0:\nsvcgw:x:65532:\n"))
		},
		func() error {
			return w.file("/etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nsvcgw:x:65532:65532:svcgw:/data:/sbin/nologin\n"))
		},
		func() error { return w.header(&tar.Header{Typeflag: tar.TypeDir, Name: "/tmp/", Mode: 0o1777}) },
	} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return w.layer()
}

// filesLayer copies the build machine's file or tree at root into a
// layer, in name order, with its modes and symbolic links (hard links
// become copies).
func filesLayer(at time.Time, root string) (v1.Layer, error) {
	w := newTar(at)
	if err := w.parents(root); err != nil {
		return nil, err
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := int64(info.Mode().Perm())
		switch {
		case d.IsDir():
			return w.dir(p, mode, 0)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return w.header(&tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: target, Mode: 0o777})
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return w.file(p, mode, data)
		}
		return fmt.Errorf("%s: not a file, directory or symbolic link", p)
	})
	if err != nil {
		return nil, fmt.Errorf("%s (from the build machine; apt-get install ca-certificates tzdata): %w", root, err)
	}
	return w.layer()
}

func binaryLayer(at time.Time, bin string) (v1.Layer, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	w := newTar(at)
	if err := w.parents(binPath); err != nil {
		return nil, err
	}
	if err := w.file(binPath, 0o755, data); err != nil {
		return nil, err
	}
	return w.layer()
}

// verify checks the layout against what build promises, and writes the
// linux/amd64 image's file system as a tar to -rootfs (for
// scripts/release-check to run). It prints what the image runs as
// "key=value" lines: user, entrypoint, cmd, and env lines.
func verify(args []string) error {
	fl := flag.NewFlagSet("verify", flag.ExitOnError)
	dir := fl.String("layout", "dist/oci", "the OCI image layout")
	version := fl.String("version", "", "the version the labels must name")
	commit := fl.String("commit", "", "the commit the labels must name")
	rootfs := fl.String("rootfs", "", "where to write linux/amd64's file system, as a tar")
	_ = fl.Parse(args)
	p, err := layout.FromPath(*dir)
	if err != nil {
		return err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	if im.MediaType != types.OCIImageIndex {
		return fmt.Errorf("index.json is %s, want %s", im.MediaType, types.OCIImageIndex)
	}
	var got []string
	for _, m := range im.Manifests {
		if m.Platform == nil {
			return fmt.Errorf("index.json: manifest %s names no platform", m.Digest)
		}
		got = append(got, m.Platform.String())
	}
	if want := []string{"linux/amd64", "linux/arm64/v8"}; !slices.Equal(got, want) {
		return fmt.Errorf("index.json names platforms %v, want %v", got, want)
	}
	for _, m := range im.Manifests {
		img, err := idx.Image(m.Digest)
		if err != nil {
			return err
		}
		if err := checkImage(img, *m.Platform, *version, *commit); err != nil {
			return fmt.Errorf("%s: %w", m.Platform, err)
		}
		if m.Platform.Architecture != "amd64" {
			continue
		}
		cf, _ := img.ConfigFile()
		c := cf.Config
		fmt.Printf("user=%s\nentrypoint=%s\ncmd=%s\n", c.User, strings.Join(c.Entrypoint, " "), strings.Join(c.Cmd, " "))
		for _, e := range c.Env {
			fmt.Printf("env=%s\n", e)
		}
		if *rootfs != "" {
			if err := writeRootfs(img, *rootfs); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkImage(img v1.Image, plat v1.Platform, version, commit string) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	c := cf.Config
	var errs []error
	fail := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if cf.OS != plat.OS || cf.Architecture != plat.Architecture {
		fail("config is for %s/%s", cf.OS, cf.Architecture)
	}
	if c.User != user {
		fail("runs as %q, want %q (not root)", c.User, user)
	}
	if !slices.Equal(c.Entrypoint, []string{binPath}) || !slices.Equal(c.Cmd, []string{"serve"}) {
		fail("entrypoint %q and cmd %q, want [%s] [serve]", c.Entrypoint, c.Cmd, binPath)
	}
	if _, ok := c.Volumes[dataDir]; !ok || len(c.Volumes) != 1 {
		fail("volumes %v, want only %s", c.Volumes, dataDir)
	}
	if _, ok := c.ExposedPorts[port]; !ok {
		fail("exposes %v, want %s", c.ExposedPorts, port)
	}
	for _, e := range env {
		if !slices.Contains(c.Env, e) {
			fail("env %q lacks %s", c.Env, e)
		}
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.source":   defaultSrc,
		"org.opencontainers.image.revision": commit,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.licenses": licence,
	} {
		if got := c.Labels[k]; got != want || got == "" {
			fail("label %s is %q, want %q", k, got, want)
		}
	}
	// The file system: what the layers promise, and a binary for the
	// platform.
	files := map[string]*tar.Header{}
	var bin []byte
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		files["/"+strings.TrimSuffix(h.Name, "/")] = h
		if "/"+h.Name == binPath {
			if bin, err = io.ReadAll(tr); err != nil {
				return err
			}
		}
	}
	for _, f := range []string{binPath, caBundle, zoneinfo + "/UTC", zoneinfo + "/Europe/Berlin", "/etc/passwd", "/etc/group", dataDir, "/tmp"} {
		if files[f] == nil {
			fail("no %s in the file system", f)
		}
	}
	if h := files[dataDir]; h != nil && (h.Uid != uid || h.Gid != uid) {
		fail("%s is owned by %d:%d, want %d:%d", dataDir, h.Uid, h.Gid, uid, uid)
	}
	if len(files) > 2000 {
		fail("%d files: more than the binary, certificates and zones", len(files))
	}
	if bin != nil {
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[plat.Architecture]
		f, err := elf.NewFile(bytes.NewReader(bin))
		switch {
		case err != nil:
			fail("%s: %v", binPath, err)
		case f.Machine != want:
			fail("%s is for %s, want %s", binPath, f.Machine, want)
		case slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }):
			fail("%s is dynamically linked; the image has no libc", binPath)
		}
	}
	return errors.Join(errs...)
}

func writeRootfs(img v1.Image, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// push writes the layout's index, with both images, to each reference,
// with the credentials of the Docker config (docker login, or
// $DOCKER_CONFIG).
func push(args []string) error {
	fl := flag.NewFlagSet("push", flag.ExitOnError)
	dir := fl.String("layout", "dist/oci", "the OCI image layout")
	_ = fl.Parse(args)
	if fl.NArg() == 0 {
		return errors.New("name at least one reference, e.g. ghcr.io/svcgw/svcgw:v1.2.3")
	}
	p, err := layout.FromPath(*dir)
	if err != nil {
		return err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return err
	}
	for _, r := range fl.Args() {
		ref, err := name.ParseReference(r)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(ref, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
		d, _ := idx.Digest()
		fmt.Printf("pushed %s@%s\n", ref, d)
	}
	return nil
}
