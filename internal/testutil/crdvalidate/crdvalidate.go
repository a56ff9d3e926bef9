// Package crdvalidate validates objects against a generated CRD file the way the API server
// does (structural defaulting, OpenAPI schema, list types, CEL rules), in process and in
// milliseconds. It gives CEL rule changes fast feedback; the envtest suites check the same cases
// against a real API server. It is for tests only.
package crdvalidate

import (
	"context"
	"fmt"
	"os"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// Validator checks objects of one CRD version.
type Validator struct {
	structural *structuralschema.Structural
	schema     validation.SchemaValidator
	cel        *cel.Validator
}

// Load reads a CRD manifest and builds the validator of the given version.
func Load(path, version string) (*Validator, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read crd: %w", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, fmt.Errorf("parse crd: %w", err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != version {
			continue
		}
		var internal apiextensions.JSONSchemaProps
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, &internal, nil); err != nil {
			return nil, fmt.Errorf("convert schema: %w", err)
		}
		s, err := structuralschema.NewStructural(&internal)
		if err != nil {
			return nil, fmt.Errorf("structural schema: %w", err)
		}
		sv, _, err := validation.NewSchemaValidator(&internal)
		if err != nil {
			return nil, fmt.Errorf("schema validator: %w", err)
		}
		return &Validator{structural: s, schema: sv, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}, nil
	}
	return nil, fmt.Errorf("crd %s has no version %s", crd.Name, version)
}

// Default applies the schema's defaults to obj in place, as the API server does on write.
func (v *Validator) Default(obj map[string]any) {
	structuraldefaulting.Default(obj, v.structural)
}

// Validate defaults obj (and old, when given) and returns every error the API server would
// report for a create (old == nil) or an update.
func (v *Validator) Validate(obj, old map[string]any) field.ErrorList {
	normalizeNumbers(obj)
	normalizeNumbers(old)
	v.Default(obj)
	var errs field.ErrorList
	if old != nil {
		v.Default(old)
		errs = append(errs, validation.ValidateCustomResourceUpdate(nil, obj, old, v.schema)...)
	} else {
		errs = append(errs, validation.ValidateCustomResource(nil, obj, v.schema)...)
	}
	errs = append(errs, schemaobjectmeta.Validate(context.Background(), nil, obj, v.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, v.structural, obj)...)
	var oldObj any
	if old != nil {
		oldObj = old
	}
	celErrs, _ := v.cel.Validate(context.Background(), nil, v.structural, obj, oldObj, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// normalizeNumbers turns whole numbers into int64 in place, as the API server's JSON decoder
// does; YAML decoding yields float64 and Go literals yield int.
func normalizeNumbers(x any) any {
	switch t := x.(type) {
	case map[string]any:
		for k, v := range t {
			t[k] = normalizeNumbers(v)
		}
	case []any:
		for i, v := range t {
			t[i] = normalizeNumbers(v)
		}
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
	case int:
		return int64(t)
	case int32:
		return int64(t)
	}
	return x
}
