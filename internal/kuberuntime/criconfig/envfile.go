package criconfig

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// envFileValue returns the value of key in an env file, the format of an
// env var's fileKeyRef, as the kubelet reads it: lines NAME='value', the
// value in single quotes (taken literally, and spanning lines until the
// closing quote), blank lines and lines starting with '#' skipped, leading
// blanks ignored, a comment allowed after the closing quote; no blank
// before '='; a blank right after '=' makes the value empty. It returns ""
// when key is not there. The first definition of key wins; lines after it
// are not read.
func envFileValue(r io.Reader, key string) (string, error) {
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimLeft(sc.Text(), " \t")
		if text == "" || text[0] == '#' {
			continue
		}
		name, rest, ok := strings.Cut(text, "=")
		switch {
		case !ok:
			return "", fmt.Errorf("line %d: no '='", line)
		case name == "":
			return "", fmt.Errorf("line %d: no variable name", line)
		case strings.TrimRight(name, " \t") != name:
			return "", fmt.Errorf("line %d: a blank before '='", line)
		}
		if rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			// NAME= 'x' sets NAME to the empty string, as a shell does.
			if name == key {
				return "", nil
			}
			continue
		}
		if !strings.HasPrefix(rest, "'") {
			return "", fmt.Errorf("line %d: the value of %s is not in single quotes", line, name)
		}
		rest = rest[1:]
		start := line
		var value strings.Builder
		for {
			end := strings.IndexByte(rest, '\'')
			if end >= 0 {
				value.WriteString(rest[:end])
				after := strings.TrimLeft(rest[end+1:], " \t")
				if after != "" && after[0] != '#' {
					return "", fmt.Errorf("line %d: text after the closing quote", line)
				}
				break
			}
			value.WriteString(rest)
			value.WriteByte('\n')
			if !sc.Scan() {
				if err := sc.Err(); err != nil {
					return "", err
				}
				return "", fmt.Errorf("line %d: the quote opened there is never closed", start)
			}
			line++
			rest = sc.Text()
		}
		if name == key {
			return value.String(), nil
		}
	}
	return "", sc.Err()
}
