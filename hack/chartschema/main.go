// Command chartschema writes the JSON schema of helm-slurm-cluster's values from the
// SlurmCluster CRD: the values are the SlurmCluster's spec, so helm checks them against the
// same schema the API server uses (CEL rules aside).
//
//	go run ./hack/chartschema CRD.yaml OUT.json
package main

import (
	"encoding/json"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: chartschema CRD.yaml OUT.json")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "chartschema:", err)
		os.Exit(1)
	}
}

func run(crdPath, out string) error {
	data, err := os.ReadFile(crdPath)
	if err != nil {
		return err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return err
	}
	if len(crd.Spec.Versions) != 1 {
		return fmt.Errorf("want one version, have %d", len(crd.Spec.Versions))
	}
	spec, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if !ok {
		return fmt.Errorf("no spec in the schema")
	}
	strip(&spec)
	doc := map[string]any{"$schema": "https://json-schema.org/draft-07/schema#", "title": "helm-slurm-cluster values: a SlurmCluster spec"}
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	for k, v := range m {
		doc[k] = v
	}
	// The schema's defaults are applied by the API server; in values they would only hide
	// what the user wrote.
	b, err = json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(b, '\n'), 0o644)
}

// strip removes what JSON schema validators do not know (CEL rules, Kubernetes extensions) and
// the defaults, recursively.
func strip(s *apiextensionsv1.JSONSchemaProps) {
	s.XValidations = nil
	s.Default = nil
	s.XListMapKeys, s.XListType, s.XMapType = nil, nil, nil
	for k, p := range s.Properties {
		strip(&p)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		strip(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		strip(s.AdditionalProperties.Schema)
	}
}
