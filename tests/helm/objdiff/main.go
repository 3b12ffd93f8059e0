// objdiff compares two streams of Kubernetes objects (multi-document YAML) semantically,
// object by object: objects are matched by apiVersion, kind, namespace and name, parsed
// as Kubernetes reads them (YAML to JSON), and compared value by value, so that key
// order, quoting and comments do not matter. The labels Helm adds to an object's own
// metadata (helm.sh/chart, app.kubernetes.io/managed-by, app.kubernetes.io/instance) are
// left out. Prints every difference with its path; exits 1 when there is one.
//
//	objdiff EXPECTED.yaml ACTUAL.yaml
package main

import (
	"bufio"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance"}

type object = map[string]any

func readObjects(path string) (map[string]object, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var docs []string
	var current strings.Builder
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.HasPrefix(line, "---") && strings.TrimSpace(strings.TrimLeft(line, "-")) == "" {
			docs = append(docs, current.String())
			current.Reset()
			continue
		}
		current.WriteString(line)
		current.WriteByte('\n')
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	docs = append(docs, current.String())

	objects := map[string]object{}
	for i, doc := range docs {
		var parsed any
		if err := yaml.Unmarshal([]byte(doc), &parsed); err != nil {
			return nil, fmt.Errorf("%s: document %d: %v", path, i+1, err)
		}
		obj, ok := parsed.(object)
		if !ok || len(obj) == 0 {
			continue // empty documents and comments only
		}
		if obj["kind"] == "List" {
			return nil, fmt.Errorf("%s: document %d: a List, expected single objects", path, i+1)
		}
		normalize(obj)
		key := keyOf(obj)
		if _, dup := objects[key]; dup {
			return nil, fmt.Errorf("%s: %s appears twice", path, key)
		}
		objects[key] = obj
	}
	return objects, nil
}

func str(m object, keys ...string) string {
	var cur any = m
	for _, k := range keys {
		next, ok := cur.(object)
		if !ok {
			return ""
		}
		cur = next[k]
	}
	s, _ := cur.(string)
	return s
}

func keyOf(obj object) string {
	ns := str(obj, "metadata", "namespace")
	if ns != "" {
		ns += "/"
	}
	return fmt.Sprintf("%s %s %s%s", str(obj, "apiVersion"), str(obj, "kind"), ns, str(obj, "metadata", "name"))
}

func normalize(obj object) {
	metadata, ok := obj["metadata"].(object)
	if !ok {
		return
	}
	if labels, ok := metadata["labels"].(object); ok {
		for _, l := range helmLabels {
			delete(labels, l)
		}
		if len(labels) == 0 {
			delete(metadata, "labels")
		}
	}
	if annotations, ok := metadata["annotations"].(object); ok && len(annotations) == 0 {
		delete(metadata, "annotations")
	}
}

func diff(path string, a, b any, out *[]string) {
	if reflect.DeepEqual(a, b) {
		return
	}
	am, aok := a.(object)
	bm, bok := b.(object)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diff(path+"."+k, am[k], bm[k], out)
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			diff(fmt.Sprintf("%s[%d]", path, i), al[i], bl[i], out)
		}
		return
	}
	*out = append(*out, fmt.Sprintf("%s: %s != %s", path, show(a), show(b)))
}

func show(v any) string {
	if v == nil {
		return "(absent)"
	}
	text, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.ReplaceAll(strings.TrimSpace(string(text)), "\n", " ")
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: objdiff EXPECTED.yaml ACTUAL.yaml")
		os.Exit(2)
	}
	expected, err := readObjects(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "objdiff:", err)
		os.Exit(2)
	}
	actual, err := readObjects(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "objdiff:", err)
		os.Exit(2)
	}
	keys := map[string]bool{}
	for k := range expected {
		keys[k] = true
	}
	for k := range actual {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	differences := 0
	for _, key := range sorted {
		e, inE := expected[key]
		a, inA := actual[key]
		switch {
		case !inA:
			fmt.Printf("only in %s: %s\n", os.Args[1], key)
			differences++
		case !inE:
			fmt.Printf("only in %s: %s\n", os.Args[2], key)
			differences++
		default:
			var out []string
			diff("", e, a, &out)
			if len(out) == 0 {
				fmt.Printf("same: %s\n", key)
				continue
			}
			differences++
			fmt.Printf("differs: %s\n", key)
			for _, line := range out {
				fmt.Printf("    %s\n", line)
			}
		}
	}
	if differences > 0 {
		fmt.Printf("%d of %d objects differ\n", differences, len(sorted))
		os.Exit(1)
	}
	fmt.Printf("all %d objects are the same\n", len(sorted))
}
