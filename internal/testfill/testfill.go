// Package testfill fills values for tests: FillNonZero, for the tests that
// compare a hand-written JSON encoder with encoding/json (a field the
// encoder does not write then shows), and JSONNames, for the tests that
// check a hand-written scanner's keys against its type. It is imported by
// tests only.
package testfill

import (
	"cmp"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// JSONNames returns the sorted names encoding/json gives typ's exported
// fields (a struct's; embedded structs are not followed): the members a
// hand-written scanner of typ must know.
func JSONNames(typ reflect.Type) []string {
	var names []string
	for i := range typ.NumField() {
		f := typ.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); f.IsExported() && name != "-" {
			names = append(names, cmp.Or(name, f.Name))
		}
	}
	slices.Sort(names)
	return names
}

// FillNonZero sets v, and every exported field and element within it, to
// a value that is not the zero of its type: a string "x", a number 1 (a
// float 0.5), true, one element, one map entry, raw JSON 1, an interface
// "x". A test that compares a hand-written encoder with encoding/json fills
// a value with it so that a field the encoder does not write shows.
func FillNonZero(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		FillNonZero(p.Elem())
		v.Set(p)
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte("1"))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		FillNonZero(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		FillNonZero(k)
		FillNonZero(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				FillNonZero(v.Field(i))
			}
		}
	case reflect.Interface:
		v.Set(reflect.ValueOf("x"))
	default:
		panic("FillNonZero: " + v.Type().String())
	}
}
