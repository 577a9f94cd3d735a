package gitcheckout

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Files of a mounted credential directory (the grant's Secret).
const (
	UsernameFile = "username"
	TokenFile    = "token"
)

// HelperCommand returns the credential.helper value that runs exe with
// args (each quoted for the shell; the leading '!' makes Git run it as a
// shell command, appending the operation).
func HelperCommand(exe string, args ...string) string {
	q := make([]string, 0, len(args)+1)
	for _, a := range append([]string{exe}, args...) {
		q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	return "!" + strings.Join(q, " ")
}

// AnswerCredential is the credential helper
// (gitcredentials(7), "Custom helpers"): for "get" it reads Git's request
// from in and, only when its protocol and host are the repository's,
// writes the username and the token read now from credDir. "store" and
// "erase" are read and ignored: nothing is ever stored. A request for
// another host (an LFS redirect to object storage) gets no answer.
func AnswerCredential(op string, in io.Reader, out io.Writer, credDir, repository string) error {
	req := map[string]string{}
	sc := bufio.NewScanner(io.LimitReader(in, 64<<10))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			break
		}
		k, v, _ := strings.Cut(line, "=")
		req[k] = v
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if op != "get" {
		return nil
	}
	u, err := url.Parse(repository)
	if err != nil {
		return fmt.Errorf("repository URL: %w", err)
	}
	if req["protocol"] != u.Scheme || !strings.EqualFold(req["host"], u.Host) {
		return nil
	}
	user, err := readLine(filepath.Join(credDir, UsernameFile))
	if err != nil {
		return err
	}
	token, err := readLine(filepath.Join(credDir, TokenFile))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "username=%s\npassword=%s\n", user, token)
	return err
}

func readLine(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("credential: %w", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" || strings.ContainsAny(s, "\n\r\x00") {
		return "", errors.New("credential: " + path + " must hold one non-empty line")
	}
	return s, nil
}

// CheckCredentialDir reports whether dir holds a readable username and
// token.
func CheckCredentialDir(dir string) error {
	for _, f := range []string{UsernameFile, TokenFile} {
		if _, err := readLine(filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	return nil
}
