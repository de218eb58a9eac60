"""The declared type of a field as text, from its signature: as reflection prints it, or as the DAC does (each type
argument in brackets with its assembly, type forwarding followed).  A mixin of
:class:`~clrlayout.types.layouts.TypeLayouts` (its ``names``, ``_resolve`` and ``_core_image``)."""

from __future__ import annotations

from . import signatures as sigs


class DeclaredTypes:
    """Names of the types that field signatures name."""

    def _token_text(self, image, token: int) -> str:
        table, rid = token >> 24, token & 0xFFFFFF
        if table == 0x02:
            return image.metadata.type_name(rid) or f"<type {token:#010x}>"
        if table == 0x01:
            ref = image.metadata.type_ref(rid)
            return ref[0] if ref else f"<type {token:#010x}>"
        return f"<type {token:#010x}>"

    def _sig_text(self, sig, image, context: list, depth: int = 0, dac: bool = False) -> str:
        """The name of the type a signature names: as reflection prints it, or (``dac``) as the DAC does, each
        type argument in brackets with its assembly (``[[System.Object, System.Private.CoreLib]]``)."""
        e = sig.element
        if depth > sigs.MAX_DEPTH:
            return "?"
        if e in sigs.PRIMITIVE_NAMES:
            return sigs.PRIMITIVE_NAMES[e]
        if e in (sigs.CLASS, sigs.VALUETYPE):
            if sig.token >> 24 == 0x1B:
                spec = image.metadata.type_spec(sig.token & 0xFFFFFF)
                try:
                    return self._sig_text(sigs.type_spec(spec), image, context, depth + 1, dac) if spec else "?"
                except sigs.SignatureError:
                    return "?"
            return self._token_text(image, sig.token)
        if e == sigs.GENERICINST:
            if not dac:
                args = ",".join(self._sig_text(a, image, context, depth + 1) for a in sig.args)
                return f"{self._token_text(image, sig.token)}[{args}]"
            args = ",".join(f"[{self._sig_text(a, image, context, depth + 1, dac)}, "
                            f"{self._sig_assembly(a, image, context, depth + 1)}]" for a in sig.args)
            return f"{self._token_text(image, sig.token)}[{args}]"
        if e == sigs.VAR:
            if sig.number < len(context):
                name = (self.names.name if dac else self.names.reflection_name)(context[sig.number])
                return name or f"!{sig.number}"
            return f"!{sig.number}"
        if e == sigs.MVAR:
            return f"!!{sig.number}"
        inner = self._sig_text(sig.inner, image, context, depth + 1, dac) if sig.inner is not None else "?"
        if e == sigs.SZARRAY:
            return inner + "[]"
        if e == sigs.ARRAY:
            return inner + ("[*]" if sig.rank == 1 else "[" + "," * (sig.rank - 1) + "]")
        if e == sigs.PTR:
            return inner + "*"
        if e == sigs.BYREF:
            return inner + "&"
        return "System.IntPtr" if e == sigs.FNPTR else "?"

    def _sig_assembly(self, sig, image, context: list, depth: int = 0) -> str:
        """The simple name of the assembly that defines the type a signature names (an array's, pointer's or
        instantiation's: its element's or generic type's), where the runtime finds it (type forwarding
        followed)."""
        e = sig.element
        if depth > sigs.MAX_DEPTH:
            return "?"
        if e in sigs.PRIMITIVE_NAMES or e in (sigs.OBJECT, sigs.STRING, sigs.TYPEDBYREF):
            core = self._core_image()
            return (core.metadata.assembly_name if core is not None else None) or "?"
        if e in (sigs.CLASS, sigs.VALUETYPE, sigs.GENERICINST):
            if sig.token >> 24 == 0x1B:
                spec = image.metadata.type_spec(sig.token & 0xFFFFFF)
                try:
                    return self._sig_assembly(sigs.type_spec(spec), image, context, depth + 1) if spec else "?"
                except sigs.SignatureError:
                    return "?"
            where = self._resolve(image, sig.token)
            if where is not None:
                return where[0].metadata.assembly_name or "?"
            ref = image.metadata.type_ref(sig.token & 0xFFFFFF) if sig.token >> 24 == 0x01 else None
            return (ref[1] if ref else image.metadata.assembly_name) or "?"
        if e == sigs.VAR and sig.number < len(context):
            return self.names.assembly_name(context[sig.number]) or "?"
        if sig.inner is not None:
            return self._sig_assembly(sig.inner, image, context, depth + 1)
        return "?"
