package podtest

import "reflect"

// SharedPath returns the path, below path, of a pointer, map or slice that
// a and b, two values of the same type, share, or "" when they share none:
// what a copy that claims to be deep is checked with. Unexported fields
// (time.Time's location, a Quantity's cached string) are not looked at.
func SharedPath(path string, a, b any) string {
	return sharedPath(path, reflect.ValueOf(a), reflect.ValueOf(b))
}

func sharedPath(path string, a, b reflect.Value) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		return sharedPath(path, a.Elem(), b.Elem())
	case reflect.Map:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for _, k := range a.MapKeys() {
			if bv := b.MapIndex(k); bv.IsValid() {
				if p := sharedPath(path+"["+k.String()+"]", a.MapIndex(k), bv); p != "" {
					return p
				}
			}
		}
	case reflect.Slice:
		if a.Len() > 0 && b.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for i := range min(a.Len(), b.Len()) {
			if p := sharedPath(path, a.Index(i), b.Index(i)); p != "" {
				return p
			}
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if !a.Type().Field(i).IsExported() {
				continue
			}
			if p := sharedPath(path+"."+a.Type().Field(i).Name, a.Field(i), b.Field(i)); p != "" {
				return p
			}
		}
	}
	return ""
}
